package wclayer

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzImport feeds arbitrary bytes to ImportLayer. Whatever the input, the importer must not
// panic, must write nothing outside the layer folder, and must leave either the whole layer or
// nothing; a layer it accepted must export, and the export must import and export again to
// the same entries. Seeds: testdata/fuzz/FuzzImport and the fixtures below. It fuzzes the
// emulator's importer and on-disk format, which exist only under Linux; on Windows ociwclayer
// imports, behind the checker that TestCheckTarRefuses covers.
func FuzzImport(f *testing.F) {
	requireRoot(f)
	f.Add(winTar(f, baseEntries()))
	f.Add(winTar(f, childEntries()))
	f.Add(winTar(f, []fent{{name: "Files/../evil", typ: tar.TypeReg, body: "x"}}))
	f.Add(winTar(f, []fent{{name: "Files/l", typ: tar.TypeSymlink, link: `..\..\x`}}))
	f.Add(winTar(f, []fent{{name: "Files/a", typ: tar.TypeReg, body: "1"}, {name: "Files/A", typ: tar.TypeLink, link: "Files/a"}}))
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		layer := filepath.Join(dir, "layers", "l")
		_, err := New().ImportLayer(context.Background(), bytes.NewReader(data), layer, nil, ImportOptions{})
		assertOnly(t, dir, "layers")
		if err != nil {
			assertOnly(t, filepath.Join(dir, "layers"))
			return
		}
		assertOnly(t, filepath.Join(dir, "layers"), "l")
		assertInside(t, layer)
		first := exportBytes(t, New(), layer)
		again := filepath.Join(dir, "layers", "again")
		importBytes(t, New(), first, again, nil)
		if d := diffEntries(readEntries(t, first), readEntries(t, exportBytes(t, New(), again))); d != "" {
			t.Fatalf("export is not stable across import:\n%s", d)
		}
	})
}

// assertInside fails if a symlink in layer was written pointing out of it in a way the
// importer should have refused (relative climbs above the top folder).
func assertInside(t *testing.T, layer string) {
	t.Helper()
	err := filepath.Walk(layer, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(layer, p)
		if symlinkEscapes(strings.Split(filepath.ToSlash(rel), "/"), target) {
			t.Errorf("symlink %s -> %s escapes", rel, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
