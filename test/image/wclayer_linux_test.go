package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/openhcs/runhcs/internal/wclayer"

	"github.com/openhcs/runhcs/internal/testenv"
)

// TestImportWithWclayer feeds the layers this package writes to the importer the snapshotter's
// differ uses, so a format mismatch between the test images and runhcs shows up here and not as
// an end-to-end failure.
func TestImportWithWclayer(t *testing.T) {
	testenv.RequireRoot(t, "layer import sets ownership")
	img := Default([]byte("WORKLOAD"))
	img.Layers = append(img.Layers, Layer{Entries: []Entry{
		{Path: "Files/workload/workload.exe", Whiteout: true},
		{Path: "Files/data/new.txt", Data: []byte("new")},
	}})
	var buf bytes.Buffer
	if err := img.WriteOCI(&buf); err != nil {
		t.Fatal(err)
	}
	files, _ := readTar(t, bytes.NewReader(buf.Bytes()))
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(blob(t, files, index.Manifests[0]), &m); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	var parents []string
	for i, d := range m.Layers {
		zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, d)))
		if err != nil {
			t.Fatal(err)
		}
		layer := filepath.Join(dir, fmt.Sprintf("layer%d", i))
		if _, err := wclayer.New().ImportLayer(context.Background(), zr, layer, parents, wclayer.ImportOptions{}); err != nil {
			t.Fatalf("wclayer.ImportLayer of layer %d: %v", i, err)
		}
		parents = append([]string{layer}, parents...)
	}
	base, upper := parents[1], parents[0]
	// The tools' stand-ins are hard links in the tar.
	paths := append([]string{"workload/workload.exe", "Windows/System32/workload.exe"}, ToolPaths...)
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(wclayer.FilesPath(base), filepath.FromSlash(p)))
		if err != nil || string(b) != "WORKLOAD" {
			t.Errorf("base layer %s = %q, %v; want the workload", p, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(wclayer.FilesPath(upper), "data", "new.txt")); err != nil || string(b) != "new" {
		t.Errorf("upper layer data/new.txt = %q, %v", b, err)
	}
}
