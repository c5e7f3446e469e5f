package wclayer

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// These tests check the emulator's on-disk format of a layer (names resolved to the parents'
// spelling, whiteout device nodes, opaque-directory xattrs, the export of every stored header),
// which exists only under Linux. On Windows the layer is whatever ociwclayer writes.

func TestRoundTrip(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name    string
		ents    []fent
		parents bool
		// want, when set, are the entries expected back (else the input's).
		want []fent
	}{
		{name: "base layer", ents: baseEntries()},
		{name: "child layer over base", ents: childEntries(), parents: true},
		{name: "case-only duplicate: later entry wins", ents: []fent{
			{name: "Files/readme.TXT", typ: tar.TypeReg, body: "first", attrs: 0x20},
			{name: "Files/README.txt", typ: tar.TypeReg, body: "second", attrs: 0x21},
		}, want: []fent{
			{name: "Files/README.txt", typ: tar.TypeReg, body: "second", attrs: 0x21},
		}},
		{name: "file then whiteout of it in one layer", ents: []fent{
			{name: "Files/a", typ: tar.TypeReg, body: "x", attrs: 0x20},
			{name: "Files/.wh.a", typ: tar.TypeReg, noWinHdr: true},
		}, want: []fent{
			{name: "Files/a", typ: tar.TypeReg, body: "x", attrs: 0x20},
			{name: "Files/.wh.a", typ: tar.TypeReg, noWinHdr: true},
		}[1:]},
		{name: "hard link naming its target in another case", ents: []fent{
			{name: "Files/Dir", typ: tar.TypeDir, attrs: 0x10},
			{name: "Files/Dir/Target.dll", typ: tar.TypeReg, body: "dll", attrs: 0x20, sd: sampleSD},
			{name: "Files/Dir/link1.dll", typ: tar.TypeLink, link: "Files/DIR/target.DLL", attrs: 0x20},
			{name: "Files/link2.dll", typ: tar.TypeLink, link: "Files/Dir/Target.dll", attrs: 0x21},
		}},
		{name: "empty tar", ents: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var parents []string
			if tc.parents {
				base := filepath.Join(dir, "base")
				importBytes(t, New(), winTar(t, baseEntries()), base, nil)
				parents = []string{base}
			}
			in := winTar(t, tc.ents)
			layer := filepath.Join(dir, "layer")
			importBytes(t, New(), in, layer, parents)
			want := readEntries(t, in)
			if tc.want != nil {
				// Times depend on the entry's index in winTar, so rebuild want with the same
				// indexes as the input.
				all := readEntries(t, in)
				want = map[string]tarEntry{}
				for _, w := range tc.want {
					want[w.name] = all[w.name]
				}
			}
			if d := diffEntries(want, readEntries(t, exportBytes(t, New(), layer))); d != "" {
				t.Fatalf("export differs from import:\n%s", d)
			}
			if tc.parents {
				chain, err := ReadLayerChain(layer)
				if err != nil || len(chain) != 1 || chain[0] != parents[0] {
					t.Fatalf("layerchain.json = %v, %v; want %v", chain, err, parents)
				}
			}
		})
	}
}

// TestCaseInsensitiveParents checks that names resolve to the parent's spelling on disk, so
// that overlayfs merges them, while the tar keeps its own.
func TestCaseInsensitiveParents(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	importBytes(t, New(), winTar(t, baseEntries()), base, nil)
	child := filepath.Join(dir, "child")
	importBytes(t, New(), winTar(t, childEntries()), child, []string{base})
	if _, err := os.Lstat(filepath.Join(child, "Files/Windows/System32/cmd.exe")); err != nil {
		t.Fatalf("Files/WINDOWS/... was not written under the parent's spelling Files/Windows: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(child, "Files/WINDOWS")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Files/WINDOWS exists beside Files/Windows: %v", err)
	}
	fi, err := os.Lstat(filepath.Join(child, "Files/Windows/System32/hidden.sys"))
	if err != nil || !isWhiteout(fi) {
		t.Fatalf("whiteout of hidden.sys is not a 0/0 device: %v %v", fi, err)
	}
	if v, _ := getXattr(filepath.Join(child, "Files/workload"), xattrOverlayOpaque); string(v) != "y" {
		t.Fatalf("Files/workload not opaque: %q", v)
	}
}
