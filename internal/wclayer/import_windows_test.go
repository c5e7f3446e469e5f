package wclayer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
)

// These tests run the Windows half of the package under Wine (make test-windows) or on
// Windows, with fakeAPI in place of vmcompute.dll and the backup APIs, which Wine lacks.

// fakeAPI is a LayerAPI over plain folders. Import writes the tar's regular files under the
// layer folder (so a test can see what reached the importer); a layer is "activated" between
// ActivateLayer and DeactivateLayer, and only then has a mount path.
type fakeAPI struct {
	mu        sync.Mutex
	calls     []string
	active    map[string]bool
	prepared  map[string]bool
	seen      []string // entry names the importer was given
	importErr error    // returned by ImportLayerFromTar after writing what it read
	transient int      // ActivateLayer fails with ERROR_NOT_READY this many times
}

func newFake() *fakeAPI {
	return &fakeAPI{active: map[string]bool{}, prepared: map[string]bool{}}
}

func (f *fakeAPI) call(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeAPI) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeAPI) EnablePrivileges([]string) error                     { return nil }
func (f *fakeAPI) RunWithPrivileges(_ []string, fn func() error) error { return fn() }

func (f *fakeAPI) ActivateLayer(l string) error {
	f.call("activate %s", l)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.transient > 0 {
		f.transient--
		return windows.ERROR_NOT_READY
	}
	f.active[l] = true
	return nil
}

func (f *fakeAPI) DeactivateLayer(l string) error {
	f.call("deactivate %s", l)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active[l] {
		return windows.ERROR_NOT_FOUND
	}
	delete(f.active, l)
	return nil
}

func (f *fakeAPI) PrepareLayer(l string, parents []string) error {
	f.call("prepare %s %d", l, len(parents))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared[l] = true
	return nil
}

func (f *fakeAPI) UnprepareLayer(l string) error {
	f.call("unprepare %s", l)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.prepared[l] {
		return windows.ERROR_NOT_FOUND
	}
	delete(f.prepared, l)
	return nil
}

// GetLayerMountPath answers the layer folder itself, as vmcompute does for a folder layer.
func (f *fakeAPI) GetLayerMountPath(l string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active[l] {
		return "", windows.ERROR_NOT_FOUND
	}
	return l, nil
}

func (f *fakeAPI) CreateScratchLayer(l string, parents []string) error {
	f.call("createscratch %s %d", l, len(parents))
	return os.WriteFile(filepath.Join(l, ScratchVHDX), []byte("made"), 0o600)
}

func (f *fakeAPI) ExpandScratchSize(l string, size uint64) error {
	f.call("expand %s %d", l, size)
	return nil
}

func (f *fakeAPI) ConvertToBaseLayer(l string) error {
	f.call("convert %s", l)
	return nil
}

func (f *fakeAPI) DestroyLayer(l string) error {
	f.call("destroy %s", l)
	return os.RemoveAll(l)
}

func (f *fakeAPI) ImportLayerFromTar(ctx context.Context, r io.Reader, l string, parents []string) (int64, error) {
	if err := os.MkdirAll(l, 0o755); err != nil {
		return 0, err
	}
	tr := tar.NewReader(r)
	var n int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.seen = append(f.seen, h.Name)
		f.mu.Unlock()
		p := filepath.Join(l, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o644)
					n += int64(len(b))
				}
			}
		}
		if err != nil {
			return 0, err
		}
	}
	if f.importErr != nil {
		return 0, f.importErr
	}
	return n, nil
}

func (f *fakeAPI) ExportLayerToTar(ctx context.Context, w io.Writer, l string, parents []string) error {
	f.call("export %s %d", l, len(parents))
	return tar.NewWriter(w).Close()
}

func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len("content"))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("header %q: %v", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, "content"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func reg(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
func dir(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }

func TestCheckTarRefuses(t *testing.T) {
	long := strings.Repeat("a", maxComponentLen+1)
	tests := []struct {
		name string
		hdrs []*tar.Header
		bad  string // the refused entry, named in the error
	}{
		{"dot dot", []*tar.Header{reg("Files/../../evil")}, "Files/../../evil"},
		{"backslash dot dot", []*tar.Header{reg(`Files\..\..\evil`)}, `Files\..\..\evil`},
		{"absolute", []*tar.Header{reg("/Files/evil")}, "/Files/evil"},
		{"drive letter", []*tar.Header{reg("C:/Files/evil")}, "C:/Files/evil"},
		{"alternate data stream", []*tar.Header{reg("Files/a:stream")}, "Files/a:stream"},
		{"outside the prefixes", []*tar.Header{reg("Windows/evil")}, "Windows/evil"},
		{"top folder as a file", []*tar.Header{reg("Files")}, "Files"},
		{"long segment", []*tar.Header{reg("Files/" + long)}, "Files/" + long},
		{"fifo", []*tar.Header{{Name: "Files/fifo", Typeflag: tar.TypeFifo}}, "Files/fifo"},
		{"device", []*tar.Header{{Name: "Files/dev", Typeflag: tar.TypeChar}}, "Files/dev"},
		{"escaping symlink", []*tar.Header{{Name: "Files/a/l", Typeflag: tar.TypeSymlink, Linkname: "../../../x"}}, "Files/a/l"},
		{"symlink without target", []*tar.Header{{Name: "Files/l", Typeflag: tar.TypeSymlink}}, "Files/l"},
		{"hard link to a later entry", []*tar.Header{{Name: "Files/h", Typeflag: tar.TypeLink, Linkname: "Files/f"}, reg("Files/f")}, "Files/h"},
		{"hard link to a directory", []*tar.Header{dir("Files/d"), {Name: "Files/h", Typeflag: tar.TypeLink, Linkname: "Files/d"}}, "Files/h"},
		{"hard link to itself", []*tar.Header{{Name: "Files/h", Typeflag: tar.TypeLink, Linkname: "Files/H"}}, "Files/h"},
		{"hard link out", []*tar.Header{{Name: "Files/h", Typeflag: tar.TypeLink, Linkname: "../etc/passwd"}}, "Files/h"},
		{"empty whiteout", []*tar.Header{reg("Files/.wh.")}, "Files/.wh."},
		// The emulator's importer refuses an entry beneath a non-directory (importer.ensureDir);
		// beneath a symlink it would be written wherever the link points.
		{"write through a symlink", []*tar.Header{{Name: "Files/l", Typeflag: tar.TypeSymlink, Linkname: `C:\`}, reg("Files/l/evil")}, "Files/l/evil"},
		{"write through a symlink in another case", []*tar.Header{{Name: "Files/l", Typeflag: tar.TypeSymlink, Linkname: `C:\`}, reg("Files/L/evil")}, "Files/L/evil"},
		{"write under a file", []*tar.Header{reg("Files/f"), dir("Files/f/d")}, "Files/f/d"},
		{"write under a hard link", []*tar.Header{{Name: "Files/h", Typeflag: tar.TypeLink, Linkname: "Files/ok"}, reg("Files/h/x")}, "Files/h/x"},
		{"write under a whiteout", []*tar.Header{reg("Files/.wh.w"), reg("Files/w/x")}, "Files/w/x"},
		// archive/tar's writer drops GNU.sparse.* records: this one is renamed into one afterwards.
		{"sparse", []*tar.Header{{Name: "Files/s", Typeflag: tar.TypeReg, PAXRecords: map[string]string{"MSWINDOWS.XXXXXX": "1"}}}, "Files/s"},
		{"oversized record", []*tar.Header{{Name: "Files/big", Typeflag: tar.TypeReg, PAXRecords: map[string]string{PAXRawSD: strings.Repeat("A", maxPAXValue+1)}}}, "Files/big"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdrs := append([]*tar.Header{dir("Files"), reg("Files/ok")}, tc.hdrs...)
			var out bytes.Buffer
			in := bytes.Replace(tarOf(t, hdrs...), []byte("MSWINDOWS.XXXXXX"), []byte("GNU.sparse.major"), 1)
			err := checkTar(context.Background(), bytes.NewReader(in), &out)
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.bad)) {
				t.Fatalf("checkTar = %v, want an invalid-argument error naming %q", err, tc.bad)
			}
			// The refused header must not have been handed on.
			var badType byte
			for _, h := range tc.hdrs {
				if h.Name == tc.bad {
					badType = h.Typeflag
				}
			}
			tr := tar.NewReader(bytes.NewReader(out.Bytes()))
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				if h.Name == tc.bad && h.Typeflag == badType {
					t.Fatalf("refused entry %q was passed on", tc.bad)
				}
			}
		})
	}
}

// TestCheckTarAccepts: sequences the emulator's importer accepts pass the checker too: a later
// directory entry replaces a file or a link of the same name, an opaque marker leaves its
// directory a directory, and whiteout names are matched case-sensitively (".WH.x" is a file).
func TestCheckTarAccepts(t *testing.T) {
	tests := []struct {
		name string
		hdrs []*tar.Header
	}{
		{"directory replaces a file", []*tar.Header{reg("Files/x"), dir("Files/x"), reg("Files/x/y")}},
		{"directory replaces a symlink", []*tar.Header{{Name: "Files/l", Typeflag: tar.TypeSymlink, Linkname: `C:\`}, dir("Files/l"), reg("Files/l/f")}},
		{"opaque directory", []*tar.Header{dir("Files/d"), reg("Files/d/.wh..wh..opq"), reg("Files/d/new")}},
		{"not a whiteout", []*tar.Header{reg("Files/.WH.x"), reg("Files/x/y")}},
		{"deeper entries", []*tar.Header{reg("Files/a/b/c"), reg("Files/a/b/d"), reg("Files/a/e")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := checkTar(context.Background(), bytes.NewReader(tarOf(t, tc.hdrs...)), &out); err != nil {
				t.Fatalf("checkTar = %v", err)
			}
			var got []string
			tr := tar.NewReader(&out)
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, h.Name)
			}
			var want []string
			for _, h := range tc.hdrs {
				want = append(want, h.Name)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("checkTar passed on %v, want %v", got, want)
			}
		})
	}
}

// TestCheckTarKeepsEntries: what the checker hands ociwclayer is the tar it read, entry for
// entry (names, types, modes, times, Windows PAX records, link targets, content), less global
// headers.
func TestCheckTarKeepsEntries(t *testing.T) {
	in := winTar(t, []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/Windows", typ: tar.TypeDir, attrs: 0x10, sd: sampleSD},
		{name: "Files/Windows/a.txt", typ: tar.TypeReg, body: "hello", attrs: 0x20, sd: sampleSD},
		{name: "Files/Windows/A.lnk", typ: tar.TypeLink, link: "Files/Windows/a.txt", attrs: 0x20},
		{name: "Files/link", typ: tar.TypeSymlink, link: `C:\Windows`, attrs: 0x420, mount: true},
		{name: "Files/.wh.gone", typ: tar.TypeReg, noWinHdr: true},
		{name: "Files/Windows/.wh..wh..opq", typ: tar.TypeReg, noWinHdr: true},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/Software_Delta", typ: tar.TypeReg, body: strings.Repeat("h", 70000), attrs: 0x20},
		{name: "UtilityVM/Files/EFI", typ: tar.TypeDir, attrs: 0x10},
	})
	var withGlobal bytes.Buffer
	tw := tar.NewWriter(&withGlobal)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "global", PAXRecords: map[string]string{"comment": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	withGlobal.Write(in)
	var out bytes.Buffer
	if err := checkTar(context.Background(), &withGlobal, &out); err != nil {
		t.Fatal(err)
	}
	if d := diffEntries(readEntries(t, in), readEntries(t, out.Bytes())); d != "" {
		t.Fatalf("entries changed:\n%s", d)
	}
}

func listDir(t *testing.T, d string) []string {
	t.Helper()
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestImportWindows(t *testing.T) {
	ctx := context.Background()
	good := tarOf(t, dir("Files"), reg("Files/new.txt"))
	hostile := tarOf(t, dir("Files"), reg("Files/new.txt"), reg("Files/../../evil"))
	tests := []struct {
		name      string
		existing  bool
		tar       []byte
		importErr error
		wantErr   error // nil: success
	}{
		{"new layer", false, good, nil, nil},
		{"replaces a layer", true, good, nil, nil},
		{"hostile tar, no layer", false, hostile, nil, errdefs.ErrInvalidArgument},
		{"hostile tar keeps the old layer", true, hostile, nil, errdefs.ErrInvalidArgument},
		{"importer fails, old layer back", true, good, errdefs.ErrUnavailable, errdefs.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			l := NewWithAPI(f)
			f.importErr = tc.importErr
			root := t.TempDir()
			layer := filepath.Join(root, "7")
			parent := filepath.Join(root, "6")
			if tc.existing {
				if err := os.MkdirAll(filepath.Join(layer, FilesDir), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(layer, FilesDir, "old.txt"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n, err := l.ImportLayer(ctx, bytes.NewReader(tc.tar), layer, []string{parent}, ImportOptions{})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("ImportLayer = %v, want %v", err, tc.wantErr)
				}
				for _, s := range f.seen {
					if strings.Contains(s, "evil") {
						t.Fatalf("the importer was given refused entry %q", s)
					}
				}
				want := []string(nil)
				if tc.existing {
					want = []string{"7"}
					if _, err := os.Stat(filepath.Join(layer, FilesDir, "old.txt")); err != nil {
						t.Fatalf("old layer not restored: %v", err)
					}
				}
				if got := listDir(t, root); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("folder holds %v after a failed import, want %v", got, want)
				}
				return
			}
			if err != nil || n != int64(len("content")) {
				t.Fatalf("ImportLayer = %d, %v", n, err)
			}
			if _, err := os.Stat(filepath.Join(layer, FilesDir, "new.txt")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(layer, FilesDir, "old.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("replaced layer's file still there: %v", err)
			}
			if chain, err := ReadLayerChain(layer); err != nil || fmt.Sprint(chain) != fmt.Sprint([]string{parent}) {
				t.Fatalf("layer chain = %v, %v", chain, err)
			}
			if got := listDir(t, root); fmt.Sprint(got) != "[7]" {
				t.Fatalf("folder holds %v after import, want only the layer", got)
			}
		})
	}
}

func TestMountWindows(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	l := NewWithAPI(f)
	f.transient = 2 // retried, as hcsshim's internal/layers retries
	root := t.TempDir()
	scratch := filepath.Join(root, "scratch")
	parents := []string{filepath.Join(root, "p2"), filepath.Join(root, "p1")}
	for _, d := range append([]string{scratch}, parents...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := l.IsMounted(scratch); ok || err != nil {
		t.Fatalf("IsMounted before Mount = %v, %v", ok, err)
	}
	vol, err := l.Mount(ctx, scratch, parents)
	if err != nil || vol != scratch {
		t.Fatalf("Mount = %q, %v", vol, err)
	}
	again, err := l.Mount(ctx, scratch, parents)
	if err != nil || again != vol {
		t.Fatalf("second Mount = %q, %v; want %q", again, err, vol)
	}
	if n := f.count("prepare "); n != 1 {
		t.Fatalf("PrepareLayer called %d times, want 1 (calls %v)", n, f.calls)
	}
	if ok, err := l.IsMounted(scratch); !ok || err != nil {
		t.Fatalf("IsMounted = %v, %v", ok, err)
	}
	if err := l.ExportLayer(ctx, io.Discard, scratch); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("ExportLayer of a mounted layer = %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := l.Unmount(ctx, scratch); err != nil {
			t.Fatalf("Unmount %d: %v", i, err)
		}
	}
	if n := f.count("deactivate "); n != 1 {
		t.Fatalf("DeactivateLayer called %d times, want 1 (calls %v)", n, f.calls)
	}
	if ok, err := l.IsMounted(scratch); ok || err != nil {
		t.Fatalf("IsMounted after Unmount = %v, %v", ok, err)
	}
	if err := l.Unmount(ctx, filepath.Join(root, "gone")); err != nil {
		t.Fatalf("Unmount of a missing folder: %v", err)
	}

	// A record left by a mount that a reboot undid is stale: not mounted, and Mount mounts again.
	if _, err := l.Mount(ctx, scratch, parents); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.active, f.prepared = map[string]bool{}, map[string]bool{}
	f.mu.Unlock()
	if ok, err := l.IsMounted(scratch); ok || err != nil {
		t.Fatalf("IsMounted with a stale record = %v, %v", ok, err)
	}
	if _, err := l.Mount(ctx, scratch, parents); err != nil {
		t.Fatal(err)
	}
	if ok, _ := l.IsMounted(scratch); !ok {
		t.Fatal("not mounted after mounting over a stale record")
	}

	// A base layer mounts as its Files folder.
	base := filepath.Join(root, "base")
	if err := os.MkdirAll(FilesPath(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if vol, err := l.Mount(ctx, base, nil); err != nil || vol != FilesPath(base) {
		t.Fatalf("Mount of a base layer = %q, %v", vol, err)
	}
}

func TestCreateScratch(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	l := NewWithAPI(f)
	root := t.TempDir()
	base := filepath.Join(root, "base")
	if err := os.MkdirAll(filepath.Join(base, UtilityVMDir), 0o755); err != nil {
		t.Fatal(err)
	}
	parents := []string{filepath.Join(root, "mid"), base}

	// Without blank.vhdx vmcompute makes the scratch.
	s1 := filepath.Join(root, "s1")
	if err := os.MkdirAll(s1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateScratch(ctx, s1, parents, 0); err != nil || f.count("createscratch "+s1) != 1 {
		t.Fatalf("CreateScratch = %v, calls %v", err, f.calls)
	}
	// With it, it is copied and grown to the requested size.
	if err := os.WriteFile(filepath.Join(base, scratchTemplate), []byte("template"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := filepath.Join(root, "s2")
	if err := os.MkdirAll(s2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateScratch(ctx, s2, parents, 30<<30); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(s2, ScratchVHDX)); err != nil || string(b) != "template" {
		t.Fatalf("scratch = %q, %v", b, err)
	}
	if f.count(fmt.Sprintf("expand %s %d", s2, uint64(30<<30))) != 1 {
		t.Fatalf("no ExpandScratchSize: %v", f.calls)
	}
	if err := l.CreateScratch(ctx, s2, nil, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("CreateScratch without parents = %v", err)
	}

	// The utility VM scratch needs the base layer's SystemTemplate.vhdx.
	vm := filepath.Join(s2, "vm")
	if err := l.CreateUVMScratch(ctx, vm, parents); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("CreateUVMScratch without a template = %v", err)
	}
	if err := os.WriteFile(filepath.Join(base, UtilityVMDir, uvmScratchTemplate), []byte("uvm"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateUVMScratch(ctx, vm, parents); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(vm, ScratchVHDX)); err != nil || string(b) != "uvm" {
		t.Fatalf("utility VM scratch = %q, %v", b, err)
	}
}
