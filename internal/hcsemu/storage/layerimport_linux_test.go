package storage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/testenv"
	"github.com/openhcs/runhcs/internal/wclayer"
)

// sd is a self-relative security descriptor (O:BAG:SYD:(A;;FA;;;SY)).
var sd = []byte{
	0x01, 0x00, 0x04, 0x80, 0x14, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x30, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x20, 0x00, 0x00, 0x00,
	0x20, 0x02, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
	0x02, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0xff, 0x01, 0x1f, 0x00,
	0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
}

type stream struct {
	id   uint32
	data []byte
}

// legacyBytes is a file of hcsshim's legacy layout: attributes, then a backup stream.
func legacyBytes(attrs uint32, streams ...stream) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, attrs)
	for _, s := range streams {
		_ = writeBackupStreamHeader(&b, s.id, int64(len(s.data)))
		b.Write(s.data)
	}
	return b.Bytes()
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// importFolder writes the import folder hcsshim's legacy writer would for a layer with the
// folder data (with a security descriptor), data/new.txt and the hive System_Delta.
func importFolder(t *testing.T, dir string, newTxt []byte) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "Files.$wcidirs$"), legacyBytes(0x10))
	writeFile(t, filepath.Join(dir, "Files", "data.$wcidirs$"), legacyBytes(0x10, stream{backupSecurity, sd}))
	writeFile(t, filepath.Join(dir, "Files", "data", "new.txt"), newTxt)
	writeFile(t, filepath.Join(dir, "Hives.$wcidirs$"), legacyBytes(0x10))
	writeFile(t, filepath.Join(dir, "Hives", "System_Delta"), []byte("regf delta"))
}

// TestImportExportLayer is vmcompute's ImportLayer and ExportLayer for a layer over a parent,
// driven as hcsshim drives them: the import folder its legacy writer fills, the deletion it then
// makes itself in the layer folder, and the export folder its legacy reader walks.
func TestImportExportLayer(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes and whiteout devices")
	ctx := context.Background()
	f, err := New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, child, in, out := filepath.Join(dir, "base"), filepath.Join(dir, "child"), filepath.Join(dir, "in"), filepath.Join(dir, "out")

	var parent bytes.Buffer
	tw := tar.NewWriter(&parent)
	for _, e := range []struct{ name, body string }{{"Files/data/", ""}, {"Files/data/gone.txt", "gone"}, {"Files/data/kept.txt", "kept"}, {"Files/other/", ""}, {"Files/other/x.txt", "x"}} {
		h := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Size: int64(len(e.body)), Mode: 0o644}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	if _, err := wclayer.New().ImportLayer(ctx, &parent, base, nil, wclayer.ImportOptions{}); err != nil {
		t.Fatal(err)
	}

	newTxt := legacyBytes(0x21, stream{backupSecurity, sd}, stream{backupData, []byte("new content")})
	importFolder(t, in, newTxt)
	for _, d := range []string{child, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Import(ctx, wire.LayerArgs{Path: child, Source: in, Parents: []string{base}}); err != nil {
		t.Fatalf("ImportLayer: %v", err)
	}
	// The parents' names are there until settled, in the folders the layer has; hcsshim removes
	// the deleted ones. A parent's folder the layer does not have is an empty placeholder, so
	// that removing it (a whiteout of the folder) succeeds.
	for _, n := range []string{"data/gone.txt", "data/kept.txt", "other"} {
		if _, err := os.Lstat(filepath.Join(child, "Files", n)); err != nil {
			t.Errorf("no placeholder for the parent's %s: %v", n, err)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(child, "Files", "other")); err != nil || len(entries) != 0 {
		t.Errorf("the placeholder folder other holds %v (%v); want it empty", entries, err)
	}
	if err := os.Remove(filepath.Join(child, "Files", "data", "gone.txt")); err != nil {
		t.Fatal(err)
	}

	if err := f.Export(ctx, wire.LayerArgs{Path: child, Source: out, Parents: []string{base}}); err != nil {
		t.Fatalf("ExportLayer: %v", err)
	}
	// Settled: a whiteout for the deletion, no placeholder left.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(child, "Files", "data", "gone.txt"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("the deleted data/gone.txt is not a whiteout: %v, mode %o", err, st.Mode)
	}
	for _, n := range []string{"data/kept.txt", "other", filepath.Base(placeholderFile)} {
		p := filepath.Join(child, "Files", n)
		if n == placeholderFile {
			p = filepath.Join(child, n)
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left after settling: %v", p, err)
		}
	}
	want := map[string][]byte{
		"Files/data.$wcidirs$": legacyBytes(0x10, stream{backupSecurity, sd}),
		"Files/data/new.txt":   newTxt,
		"Hives/System_Delta":   []byte("regf delta"),
		"tombstones.txt":       []byte("\xef\xbb\xbfVersion 1.0\r\n\\data\\gone.txt\r\n"),
	}
	got := map[string][]byte{}
	err = filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		got[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, w := range want {
		if !bytes.Equal(got[n], w) {
			t.Errorf("export folder's %s = %q, want %q", n, got[n], w)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("export folder has %s, which the layer does not", n)
		}
	}
}

// TestImportLayerRefuses: import folders the emulator cannot or must not turn into a layer are
// refused with the HRESULT and the file named, and leave the layer folder as it was.
func TestImportLayerRefuses(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes")
	ctx := context.Background()
	f, err := New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file []byte
		hr   computecore.HRESULT
	}{
		{"reparse point", legacyBytes(0x420, stream{backupReparseData, []byte{0x0c, 0, 0, 0xa0}}), computecore.E_NOTIMPL},
		{"named stream", legacyBytes(0x20, stream{backupAlternateData, []byte("x")}), computecore.E_NOTIMPL},
		{"truncated stream", legacyBytes(0x20, stream{backupData, []byte("data")})[:20], computecore.E_INVALIDARG},
		{"no attributes", []byte{1, 2}, computecore.E_INVALIDARG},
		// Refused by internal/wclayer's importer, not by the conversion: its error is the answer.
		{"name wclayer refuses", nil, computecore.E_INVALIDARG},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			layer, in := filepath.Join(dir, "layer"), filepath.Join(dir, "in")
			want := "new.txt"
			if tc.file == nil {
				importFolder(t, in, legacyBytes(0x20))
				want = "a:stream"
				writeFile(t, filepath.Join(in, "Files", "data", want), legacyBytes(0x20, stream{backupData, []byte("x")}))
			} else {
				importFolder(t, in, tc.file)
			}
			if err := os.Mkdir(layer, 0o755); err != nil {
				t.Fatal(err)
			}
			err := f.Import(ctx, wire.LayerArgs{Path: layer, Source: in})
			var e *hresult.Error
			if !errors.As(err, &e) || e.HResult != tc.hr || !strings.Contains(e.Message, want) {
				t.Fatalf("Import = %v; want %v naming %s", err, tc.hr, want)
			}
			if entries, _ := os.ReadDir(layer); len(entries) != 0 {
				t.Errorf("the refused import left %v in the layer folder", entries)
			}
		})
	}
}

// TestSettleKeepsFolderWithContent: a parent's folder that the import did not name but that
// holds a deletion stays, as an implicit folder, after the placeholders are settled.
func TestSettleKeepsFolderWithContent(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes and whiteout devices")
	layer := t.TempDir()
	writeFile(t, filepath.Join(layer, "Files", "d", "f"), nil)
	for _, p := range []string{filepath.Join(layer, "Files", "d"), filepath.Join(layer, "Files", "d", "f")} {
		if err := unix.Lsetxattr(p, xattrPlaceholder, []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(layer, placeholderFile), []byte(`["d","d/f"]`))
	if err := os.Remove(filepath.Join(layer, "Files", "d", "f")); err != nil {
		t.Fatal(err)
	}
	if err := settlePlaceholders(layer); err != nil {
		t.Fatal(err)
	}
	if v, _ := lgetxattr(filepath.Join(layer, "Files", "d"), xattrPlaceholder); v != nil {
		t.Error("the folder holding a deletion is still a placeholder")
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(layer, "Files", "d", "f"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("d/f is not a whiteout: %v", err)
	}
	if err := settlePlaceholders(layer); err != nil {
		t.Errorf("settling again: %v", err)
	}
}

// TestExportSystemDelta: hcsshim's legacy reader needs Hives\System_Delta beside Files. A
// container's scratch (whose containers have no registry under the emulator) is exported with
// an empty one; an imported layer without one is refused, naming it, and the folder left empty.
func TestExportSystemDelta(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes")
	ctx := context.Background()
	f, err := New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	scratch, layer := filepath.Join(dir, "scratch"), filepath.Join(dir, "layer")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeVHDX(filepath.Join(scratch, ScratchDisk), defaultVHDXSize); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(scratch, ScratchDisk+vhdxFSSuffix, "Files", "written.txt"), []byte("hello"))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "Files/a.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("a"))
	tw.Close()
	if _, err := wclayer.New().ImportLayer(ctx, &tb, layer, nil, wclayer.ImportOptions{}); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "out-scratch")
	os.Mkdir(out, 0o755)
	if err := f.Export(ctx, wire.LayerArgs{Path: scratch, Source: out}); err != nil {
		t.Fatalf("ExportLayer of a scratch: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "Hives", "System_Delta")); err != nil || len(b) != 0 {
		t.Errorf("the scratch's export has System_Delta %q, %v; want an empty one", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "Files", "written.txt")); err != nil || !bytes.HasSuffix(b, []byte("hello")) {
		t.Errorf("the scratch's export has written.txt %q, %v", b, err)
	}

	out = filepath.Join(dir, "out-layer")
	os.Mkdir(out, 0o755)
	err = f.Export(ctx, wire.LayerArgs{Path: layer, Source: out})
	var e *hresult.Error
	if !errors.As(err, &e) || e.HResult != computecore.E_INVALIDARG || !strings.Contains(e.Message, "System_Delta") {
		t.Fatalf("ExportLayer of a layer without hives = %v; want E_INVALIDARG naming System_Delta", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("the refused export left %v", entries)
	}
}

// TestPlaceholdersFollowTheMergedView: the placeholders are the names the parents show merged,
// nearest first, as the storage filter merges them: a name a nearer parent deleted or hid under
// an opaque folder gets none, one spelled in another case is one name, names the layer
// itself has get none, and a parent's folder the layer does not have is one placeholder with
// nothing beneath it.
func TestPlaceholdersFollowTheMergedView(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes and whiteout devices")
	ctx := context.Background()
	dir := t.TempDir()
	layerOf := func(name string, hdrs ...*tar.Header) string {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		p := filepath.Join(dir, name)
		if _, err := wclayer.New().ImportLayer(ctx, &b, p, nil, wclayer.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	reg := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644} }
	dirh := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755} }
	base := layerOf("base", dirh("Files/a/"), reg("Files/a/deleted.txt"), reg("Files/a/kept.txt"),
		dirh("Files/opq/"), reg("Files/opq/hidden.txt"), reg("Files/Mixed.txt"), reg("Files/own.txt"),
		dirh("Files/full/"), dirh("Files/full/sub/"), reg("Files/full/sub/f.txt"))
	mid := layerOf("mid", reg("Files/a/.wh.deleted.txt"), dirh("Files/opq/"), reg("Files/opq/.wh..wh..opq"),
		reg("Files/opq/shown.txt"), reg("Files/MIXED.TXT"))
	layer := filepath.Join(dir, "layer")
	if err := os.MkdirAll(filepath.Join(layer, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(layer, "Files", "OWN.txt"), []byte("own"))
	// The layer's own folders a and opq get the placeholders of what the parents show in them;
	// full, which it does not have, is one empty placeholder.
	for _, d := range []string{"a", "opq"} {
		if err := os.Mkdir(filepath.Join(layer, "Files", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := makePlaceholders(layer, []string{mid, base}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(layer, placeholderFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := []string{"MIXED.TXT", "a/kept.txt", "full", "opq/shown.txt"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("placeholders %v, want %v", got, want)
	}
}

// TestExportLayerRefusesSymlink: a layer holding what the legacy folder cannot carry under the
// emulator (a symbolic link: a reparse point) is refused with E_NOTIMPL naming it, and the
// export folder is left empty.
func TestExportLayerRefusesSymlink(t *testing.T) {
	testenv.RequireRoot(t, "trusted.* extended attributes")
	ctx := context.Background()
	f, err := New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	layer, out := filepath.Join(dir, "layer"), filepath.Join(dir, "out")
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "Files/a.txt", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	tw.Write([]byte("a"))
	tw.WriteHeader(&tar.Header{Name: "Files/link", Typeflag: tar.TypeSymlink, Linkname: "a.txt", Mode: 0o777})
	tw.Close()
	if _, err := wclayer.New().ImportLayer(ctx, &b, layer, nil, wclayer.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	err = f.Export(ctx, wire.LayerArgs{Path: layer, Source: out})
	var e *hresult.Error
	if !errors.As(err, &e) || e.HResult != computecore.E_NOTIMPL || !strings.Contains(e.Message, "Files/link") {
		t.Fatalf("Export = %v; want E_NOTIMPL naming Files/link", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("the refused export left %v", entries)
	}
}
