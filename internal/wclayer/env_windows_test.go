package wclayer

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// On Windows (and under Wine) the portable tests run over fakeAPI (import_windows_test.go), in
// place of vmcompute.dll and the backup APIs: they test this package's own logic (refusing
// hostile tars before ociwclayer sees them, moving an existing layer aside and back), not
// Microsoft's. They need no privilege then.
func layerTestEnv(tb testing.TB) *Layers {
	tb.Helper()
	return NewWithAPI(newFake())
}

// layerDiff describes how layer differs from what fakeAPI writes for the tar in want, or ""
// when it holds exactly that: the tar's directories and regular files, with their content,
// beside layerchain.json. The folder is what ociwclayer was handed, so this checks that every
// accepted entry reached it and that nothing else (a refused entry, another import's files,
// the layer it replaced) is in it.
func layerDiff(t *testing.T, layer string, want []byte) string {
	t.Helper()
	exp := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(want))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the expected tar: %v", err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeDir:
			exp[name+"/"] = ""
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			exp[name] = string(b)
		default:
			continue
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			exp[d+"/"] = ""
		}
	}
	got := map[string]string{}
	err := filepath.WalkDir(layer, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == layer {
			return err
		}
		rel, err := filepath.Rel(layer, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			got[rel+"/"] = ""
			return nil
		}
		if rel == LayerChainFile {
			return nil
		}
		b, err := os.ReadFile(p)
		got[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("walking layer %s: %v", layer, err)
	}
	var d []string
	for n, c := range exp {
		if g, ok := got[n]; !ok {
			d = append(d, "missing "+n)
		} else if g != c {
			d = append(d, "content of "+n+" differs")
		}
	}
	for n := range got {
		if _, ok := exp[n]; !ok {
			d = append(d, "unexpected "+n)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}
