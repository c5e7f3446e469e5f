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

// paxOf returns the PAX record key of a readEntries entry ("" if it has none).
func paxOf(e tarEntry, key string) string {
	for _, kv := range strings.Split(e.PAX, ";") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestChildLayerThroughHcsshim imports a layer over a parent with hcsshim's real importer
// (ociwclayer: its legacy layer writer, vmcompute's ImportLayer through the stand-in DLL, then
// the tombstones and hard links it applies itself), mounts the chain and reads the merged view,
// and exports the layer back (vmcompute's ExportLayer and hcsshim's legacy reader). The export
// must hold the same entries as the tar imported: names, types, contents, link targets, the
// whiteout, and under Files\ the attributes and security descriptors, which travel in the
// legacy folder's backup streams. Not compared, as in TestBaseLayerThroughHcsshim: times (Wine
// does not keep times set through a handle across later writes on it, and hcsshim sets them
// before it writes the stream), and the metadata of Files, Hives and the hives themselves, which
// hcsshim's reader takes from the folder as Wine shows it.
func TestChildLayerThroughHcsshim(t *testing.T) {
	l := emulatedStorage(t)
	ctx := context.Background()
	root := t.TempDir()
	base, child, scratch := filepath.Join(root, "base"), filepath.Join(root, "child"), filepath.Join(root, "scratch")

	parent := winTar(t, []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/data", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/data/kept.txt", typ: tar.TypeReg, body: "kept", attrs: 0x20},
		{name: "Files/data/gone.txt", typ: tar.TypeReg, body: "gone", attrs: 0x20},
		{name: "Files/data/replaced.txt", typ: tar.TypeReg, body: "old", attrs: 0x20},
		{name: "Files/other", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/other/deep.txt", typ: tar.TypeReg, body: "deep", attrs: 0x20},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/System_Delta", typ: tar.TypeReg, body: "regf", attrs: 0x20},
	})
	if _, err := l.ImportLayer(ctx, bytes.NewReader(parent), base, nil, ImportOptions{}); err != nil {
		t.Fatalf("importing the parent: %v", err)
	}
	in := winTar(t, []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/data", typ: tar.TypeDir, attrs: 0x10, sd: sampleSD},
		{name: "Files/data/.wh.gone.txt", typ: tar.TypeReg, noWinHdr: true},
		{name: "Files/data/new.txt", typ: tar.TypeReg, body: strings.Repeat("new ", 3000), attrs: 0x21, sd: sampleSD},
		{name: "Files/data/replaced.txt", typ: tar.TypeReg, body: "new version", attrs: 0x20},
		// hcsshim's legacy reader exports the first name of a hard-linked file (in the order
		// it walks the folder: by name) as the file and the others as links to it, so the
		// link's name sorts after its target's, as in a tar that reader wrote.
		{name: "Files/data/new.txt.link", typ: tar.TypeLink, link: "Files/data/new.txt", attrs: 0x21},
		{name: "Files/other", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/other/.wh.deep.txt", typ: tar.TypeReg, noWinHdr: true},
		{name: "Files/empty", typ: tar.TypeReg, attrs: 0x20},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/System_Delta", typ: tar.TypeReg, body: "regf delta", attrs: 0x20},
	})
	if _, err := l.ImportLayer(ctx, bytes.NewReader(in), child, []string{base}, ImportOptions{}); err != nil {
		t.Fatalf("importing the child over its parent: %v", err)
	}
	// Layers go as on Windows, through DestroyLayer: Wine cannot remove the whiteouts (character
	// devices) of the emulator's layers with ordinary file calls.
	t.Cleanup(func() {
		for _, d := range []string{scratch, child} {
			if err := l.DestroyLayer(ctx, d); err != nil && !os.IsNotExist(err) {
				t.Errorf("DestroyLayer(%s): %v", d, err)
			}
		}
	})

	// The chain, mounted for a container.
	parents := []string{child, base}
	if err := l.CreateScratch(ctx, scratch, parents, 0); err != nil {
		t.Fatal(err)
	}
	vol, err := l.Mount(ctx, scratch, parents)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	for name, want := range map[string]string{
		`data\kept.txt`: "kept", `data\replaced.txt`: "new version", `data\new.txt.link`: strings.Repeat("new ", 3000),
	} {
		if b, err := os.ReadFile(vol + name); err != nil || string(b) != want {
			t.Errorf("reading %s%s: %.20q, %v; want %.20q", vol, name, b, err, want)
		}
	}
	for _, name := range []string{`data\gone.txt`, `other\deep.txt`} {
		if _, err := os.Stat(vol + name); !os.IsNotExist(err) {
			t.Errorf("%s%s, deleted by the child layer: %v; want it gone", vol, name, err)
		}
	}
	if err := l.Unmount(ctx, scratch); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := l.ExportLayer(ctx, &out, child); err != nil {
		t.Fatalf("export: %v", err)
	}
	want, got := readEntries(t, in), readEntries(t, out.Bytes())
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: missing from the export", name)
			continue
		}
		if g.Typeflag != w.Typeflag || g.Content != w.Content || g.Linkname != w.Linkname {
			t.Errorf("%s: exported as type %c, link %q, content %s; want type %c, link %q, content %s",
				name, g.Typeflag, g.Linkname, g.Content, w.Typeflag, w.Linkname, w.Content)
		}
		if !strings.HasPrefix(name, "Files/") || strings.Contains(name, "/.wh.") || w.Typeflag == tar.TypeLink {
			continue
		}
		for _, k := range []string{PAXFileAttributes, PAXRawSD} {
			if paxOf(g, k) != paxOf(w, k) {
				t.Errorf("%s: %s exported as %q, want %q", name, k, paxOf(g, k), paxOf(w, k))
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: exported, but not in the layer imported", name)
		}
	}
}

// TestChildLayerDeletesParentFolder: a layer whose tar deletes a folder its parent fills (a
// whiteout of a folder, common in real images). hcsshim removes the deleted name from the layer
// folder after ImportLayer, with the one call that refuses a folder that is not empty; the
// emulator's placeholder of a parent's folder is empty (hcsemu's layerimport_linux.go), so the
// removal succeeds, and the folder and everything beneath it are gone from the merged view, as
// the OCI image spec defines a whiteout. The export gives the whiteout back.
func TestChildLayerDeletesParentFolder(t *testing.T) {
	l := emulatedStorage(t)
	ctx := context.Background()
	root := t.TempDir()
	base, child, scratch := filepath.Join(root, "base"), filepath.Join(root, "layers", "child"), filepath.Join(root, "scratch")
	parent := winTar(t, []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/other", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/other/deep.txt", typ: tar.TypeReg, body: "deep", attrs: 0x20},
		{name: "Files/other/sub", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/other/sub/deeper.txt", typ: tar.TypeReg, body: "deeper", attrs: 0x20},
		{name: "Files/kept", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/kept/k.txt", typ: tar.TypeReg, body: "k", attrs: 0x20},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/System_Delta", typ: tar.TypeReg, body: "regf", attrs: 0x20},
	})
	if _, err := l.ImportLayer(ctx, bytes.NewReader(parent), base, nil, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	in := winTar(t, []fent{
		{name: "Files", typ: tar.TypeDir, attrs: 0x10},
		{name: "Files/.wh.other", typ: tar.TypeReg, noWinHdr: true},
		{name: "Hives", typ: tar.TypeDir, attrs: 0x10},
		{name: "Hives/System_Delta", typ: tar.TypeReg, body: "regf", attrs: 0x20},
	})
	if _, err := l.ImportLayer(ctx, bytes.NewReader(in), child, []string{base}, ImportOptions{}); err != nil {
		t.Fatalf("importing a layer that deletes a parent's non-empty folder: %v", err)
	}
	// As in TestChildLayerThroughHcsshim: through DestroyLayer (whiteouts are devices).
	t.Cleanup(func() {
		for _, d := range []string{scratch, child} {
			if err := l.DestroyLayer(ctx, d); err != nil && !os.IsNotExist(err) {
				t.Errorf("DestroyLayer(%s): %v", d, err)
			}
		}
	})

	parents := []string{child, base}
	if err := l.CreateScratch(ctx, scratch, parents, 0); err != nil {
		t.Fatal(err)
	}
	vol, err := l.Mount(ctx, scratch, parents)
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	for _, name := range []string{`other`, `other\deep.txt`, `other\sub`, `other\sub\deeper.txt`} {
		if _, err := os.Stat(vol + name); !os.IsNotExist(err) {
			t.Errorf("%s%s, under the folder the child layer deleted: %v; want it gone", vol, name, err)
		}
	}
	if b, err := os.ReadFile(vol + `kept\k.txt`); err != nil || string(b) != "k" {
		t.Errorf("reading %skept\\k.txt: %q, %v; want the parent's file", vol, b, err)
	}
	if err := l.Unmount(ctx, scratch); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := l.ExportLayer(ctx, &out, child); err != nil {
		t.Fatalf("export: %v", err)
	}
	got := readEntries(t, out.Bytes())
	if _, ok := got["Files/.wh.other"]; !ok {
		var names []string
		for n := range got {
			names = append(names, n)
		}
		t.Errorf("the export has no whiteout of Files/other: %v", names)
	}
	for name := range got {
		if strings.HasPrefix(name, "Files/other/") || strings.HasPrefix(name, "Files/kept") {
			t.Errorf("%s: exported, but the child layer does not hold it", name)
		}
	}
}
