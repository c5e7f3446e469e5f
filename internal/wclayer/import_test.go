package wclayer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
)

// baseEntries is a base layer in the shape of a Windows Server Core layer, with every kind of
// node and record a layer tar carries.
func baseEntries() []fent {
	long := "Files/" + strings.Repeat("deep-folder-name/", 20) // past MAX_PATH (260)
	return []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10, sd: sampleSD},
		{name: "Files/Windows", typ: tar.TypeDir, attrs: 0x10, sd: sampleSD},
		{name: "Files/Windows/System32", typ: tar.TypeDir, attrs: 0x10, sd: sampleSD},
		{name: "Files/Windows/System32/cmd.exe", typ: tar.TypeReg, body: strings.Repeat("MZ", 5000), attrs: 0x20, sd: sampleSD},
		{name: "Files/Windows/System32/empty.dll", typ: tar.TypeReg, attrs: 0x21, sd: sampleSD},
		{name: "Files/Windows/System32/hidden.sys", typ: tar.TypeReg, body: "sys", attrs: 0x26},
		{name: "Files/Windows/notepad.exe", typ: tar.TypeLink, link: "Files/Windows/System32/cmd.exe", attrs: 0x20},
		{name: "Files/Documents and Settings", typ: tar.TypeSymlink, link: `C:\Users`, attrs: 0x2416, mount: true, sd: sampleSD},
		{name: "Files/Windows/System32/rel.lnk", typ: tar.TypeSymlink, link: `..\notepad.exe`, attrs: 0x420},
		{name: "Files/workload/", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/workload/workload.exe", typ: tar.TypeReg, body: "\x7fELF binary", attrs: 0x20, sd: sampleSD},
		{name: long, typ: tar.TypeDir, attrs: 0x10},
		{name: long + "file-at-the-bottom.txt", typ: tar.TypeReg, body: "deep", attrs: 0x20},
		{name: "Files/Unicode-ünïcødé-文件.txt", typ: tar.TypeReg, body: "u", attrs: 0x20},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/DefaultUser_Delta", typ: tar.TypeReg, body: "regf hive", attrs: 0x20},
		{name: "UtilityVM", typ: tar.TypeDir, attrs: 0x10},
		{name: "UtilityVM/Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "UtilityVM/Files/EFI/boot.efi", typ: tar.TypeReg, body: "efi", attrs: 0x20},
	}
}

// childEntries is a layer over baseEntries: changes, deletions, an opaque folder and names
// that differ from the parent's only in case.
func childEntries() []fent {
	return []fent{
		{name: "Files/WINDOWS/System32/cmd.exe", typ: tar.TypeReg, body: "patched", attrs: 0x20, sd: sampleSD},
		{name: "Files/Windows/System32/.wh.hidden.sys", typ: tar.TypeReg, noWinHdr: true},
		{name: "Files/workload/.wh..wh..opq", typ: tar.TypeReg, noWinHdr: true},
		{name: "Files/workload/new.txt", typ: tar.TypeReg, body: "new", attrs: 0x20},
		{name: "Files/ProgramData", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/ProgramData/app.cfg", typ: tar.TypeReg, body: "cfg", attrs: 0x20},
	}
}

func importBytes(t testing.TB, l *Layers, b []byte, layer string, parents []string) {
	t.Helper()
	if _, err := l.ImportLayer(context.Background(), bytes.NewReader(b), layer, parents, ImportOptions{}); err != nil {
		t.Fatalf("import %s: %v", layer, err)
	}
}

func exportBytes(t testing.TB, l *Layers, layer string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := l.ExportLayer(context.Background(), &out, layer); err != nil {
		t.Fatalf("export %s: %v", layer, err)
	}
	return out.Bytes()
}

// TestHostileTars: every hostile tar is refused with an invalid-argument error, and nothing is
// left behind, neither the layer nor anything beside it. Under Linux the emulator's importer
// refuses them; on Windows the checker in front of ociwclayer does.
func TestHostileTars(t *testing.T) {
	hostileTars(t, layerTestEnv(t), nil)
}

// hostileTars is TestHostileTars over whatever layer API the test set up.
func hostileTars(t *testing.T, l *Layers, parents []string) {
	tests := []struct {
		name string
		ents []fent
	}{
		{"dotdot", []fent{{name: "Files/../../etc/passwd", typ: tar.TypeReg, body: "x"}}},
		{"dotdot backslash", []fent{{name: `Files\..\..\evil`, typ: tar.TypeReg, body: "x"}}},
		{"absolute", []fent{{name: "/etc/evil", typ: tar.TypeReg, body: "x"}}},
		{"drive letter", []fent{{name: `C:\Windows\evil`, typ: tar.TypeReg, body: "x"}}},
		{"alternate data stream", []fent{{name: "Files/a:stream", typ: tar.TypeReg, body: "x"}}},
		{"outside prefixes", []fent{{name: "Other/file", typ: tar.TypeReg, body: "x"}}},
		{"top folder as a file", []fent{{name: "Files", typ: tar.TypeReg, body: "x"}}},
		{"symlink escapes", []fent{{name: "Files/a/link", typ: tar.TypeSymlink, link: "../../../etc"}}},
		{"write through a symlink", []fent{
			{name: "Files/link", typ: tar.TypeSymlink, link: `C:\`},
			{name: "Files/link/evil", typ: tar.TypeReg, body: "x"}}},
		{"write under a file", []fent{
			{name: "Files/file", typ: tar.TypeReg, body: "x"},
			{name: "Files/file/evil", typ: tar.TypeReg, body: "x"}}},
		{"hard link outside", []fent{{name: "Files/hl", typ: tar.TypeLink, link: "../../etc/passwd"}}},
		{"hard link to nothing", []fent{{name: "Files/hl", typ: tar.TypeLink, link: "Files/none"}}},
		{"hard link to directory", []fent{
			{name: "Files/d", typ: tar.TypeDir},
			{name: "Files/hl", typ: tar.TypeLink, link: "Files/d"}}},
		{"hard link to a whiteout", []fent{
			{name: "Files/.wh.gone", typ: tar.TypeReg},
			{name: "Files/hl", typ: tar.TypeLink, link: "Files/gone"}}},
		{"device node", []fent{{name: "Files/dev", typ: tar.TypeChar}}},
		{"fifo", []fent{{name: "Files/fifo", typ: tar.TypeFifo}}},
		{"long component", []fent{{name: "Files/" + strings.Repeat("a", 256), typ: tar.TypeReg}}},
		{"whiteout of dotdot", []fent{{name: "Files/.wh...", typ: tar.TypeReg}}},
		{"oversized security descriptor", []fent{{name: "Files/big", typ: tar.TypeReg, sd: make([]byte, maxPAXValue)}}},
	}
	// archive/tar's writer drops GNU.sparse.* records, so that case is patched in afterwards:
	// a record key of the same length is renamed in the bytes.
	sparse := winTar(t, []fent{{name: "Files/sparse", typ: tar.TypeReg, body: "x", pax: map[string]string{"MSWINDOWS.XXXXXX": "1"}}})
	sparse = bytes.Replace(sparse, []byte("MSWINDOWS.XXXXXX"), []byte("GNU.sparse.major"), 1)
	for _, tc := range append(tests, struct {
		name string
		ents []fent
	}{name: "GNU sparse record"}) {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			layer := filepath.Join(dir, "layers", "l")
			in := winTar(t, tc.ents)
			if tc.name == "GNU sparse record" {
				in = sparse
			}
			_, err := l.ImportLayer(context.Background(), bytes.NewReader(in), layer, parents, ImportOptions{})
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("import = %v, want an invalid-argument error", err)
			}
			assertOnly(t, dir, "layers")
			assertOnly(t, filepath.Join(dir, "layers"))
		})
	}
}

// assertOnly fails unless dir holds exactly names.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

type failingReader struct {
	r     io.Reader
	after int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("connection reset")
	}
	if len(p) > f.after {
		p = p[:f.after]
	}
	n, err := f.r.Read(p)
	f.after -= n
	return n, err
}

// TestInterruptedImport checks that a failed import leaves the existing layer as it was, and
// nothing beside it: under Linux the new layer is written beside and never renamed in, on
// Windows the old layer is moved aside and put back.
func TestInterruptedImport(t *testing.T) {
	l := layerTestEnv(t)
	dir := t.TempDir()
	layer := filepath.Join(dir, "l")
	first := winTar(t, []fent{{name: "Files/keep.txt", typ: tar.TypeReg, body: "keep", attrs: 0x20}})
	importBytes(t, l, first, layer, nil)
	second := winTar(t, baseEntries())
	for _, cut := range []int{0, 700, len(second) / 2, len(second) - 1100} {
		_, err := l.ImportLayer(context.Background(), &failingReader{bytes.NewReader(second), cut}, layer, nil, ImportOptions{})
		if err == nil {
			t.Fatalf("import cut at %d succeeded", cut)
		}
		if d := layerDiff(t, layer, first); d != "" {
			t.Fatalf("layer changed by an import cut at %d:\n%s", cut, d)
		}
		assertOnly(t, dir, "l")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.ImportLayer(ctx, bytes.NewReader(second), layer, nil, ImportOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("import with a cancelled context = %v", err)
	}
}

// TestParallelImports imports the same and different layers at once.
func TestParallelImports(t *testing.T) {
	l := layerTestEnv(t)
	dir := t.TempDir()
	base := winTar(t, baseEntries())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			layer := filepath.Join(dir, "same")
			if i%2 == 1 {
				layer = filepath.Join(dir, "diff", string(rune('a'+i)))
			}
			if _, err := l.ImportLayer(context.Background(), bytes.NewReader(base), layer, nil, ImportOptions{Sync: i == 0}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range []string{"same", "diff/b", "diff/p"} {
		if d := layerDiff(t, filepath.Join(dir, filepath.FromSlash(l)), base); d != "" {
			t.Fatalf("%s:\n%s", l, d)
		}
	}
	assertOnly(t, dir, "diff", "same")
}
