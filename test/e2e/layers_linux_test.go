package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// TestImageLayers imports a two-layer image (a gzip base and an uncompressed upper layer with a
// whiteout) and checks what the container sees: the upper layer's additions, the base's files,
// and not the whited-out one.
func TestImageLayers(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	img, workload, err := harness.TestImage("docker.io/runhcs/layers:latest")
	if err != nil {
		t.Fatal(err)
	}
	img.Layers[0] = image.BaseLayer(workload, image.BaseOptions{Extra: []image.Entry{
		{Path: "Files/data/kept.txt", Data: []byte("kept")},
		{Path: "Files/data/gone.txt", Data: []byte("gone")},
		{Path: "Files/data/replaced.txt", Data: []byte("old")},
	}})
	img.Layers = append(img.Layers, image.Layer{
		Uncompressed: true,
		Comment:      "upper layer with a whiteout",
		Entries: []image.Entry{
			{Path: "Files/data/gone.txt", Whiteout: true},
			{Path: "Files/data/new.txt", Data: []byte("new")},
			{Path: "Files/data/replaced.txt", Data: []byte("new version")},
		},
	})
	if err := env.ImportTestImage(ctx, img); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		file     string
		wantCode int
		want     string // stdout, or a substring of stderr when wantCode != 0
	}{
		{`C:\data\kept.txt`, 0, "kept"},
		{`C:\data\new.txt`, 0, "new"},
		{`C:\data\replaced.txt`, 0, "new version"},
		{`C:\data\gone.txt`, 1, "gone.txt"},
	}
	for i, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := env.CtrRun(ctx, fmt.Sprintf("layers-%d", i), img.Name, nil, image.WorkloadPath, "read", tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stdout %q, stderr %q", res.ExitCode, tt.wantCode, res.Stdout, res.Stderr)
			}
			if tt.wantCode == 0 && res.Stdout != tt.want {
				t.Errorf("stdout = %q, want %q", res.Stdout, tt.want)
			}
			if tt.wantCode != 0 && !strings.Contains(res.Stderr, tt.want) {
				t.Errorf("stderr = %q, want it to name %q", res.Stderr, tt.want)
			}
		})
	}
}

// TestImportThroughTransferService imports with containerd 2.x's ctr, whose `image import` goes
// through the daemon's transfer service, also into containerd 1.7: docs/getting-started.md
// recommends 2.x's ctr against both, and the transfer service unpacks only with an unpack_config
// entry for the image's platform (without one, 1.7 answers "no unpack platforms defined"). The
// container then runs from the layers that the service unpacked into the wcow snapshotter.
func TestImportThroughTransferService(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	img, workload, err := harness.TestImage("docker.io/runhcs/transfer:latest")
	if err != nil {
		t.Fatal(err)
	}
	img.Layers[0] = image.BaseLayer(workload, image.BaseOptions{Extra: []image.Entry{
		{Path: "Files/data/unpacked.txt", Data: []byte("unpacked by the transfer service")},
	}})
	if err := env.ImportTestImageTransfer(ctx, img); err != nil {
		t.Fatal(err)
	}
	res, err := env.CtrRun(ctx, "transfer-import", img.Name, nil, image.WorkloadPath, "read", `C:\data\unpacked.txt`)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != "unpacked by the transfer service" {
		t.Fatalf("exit code %d, stdout %q, stderr %q; want 0 and the file's text", res.ExitCode, res.Stdout, res.Stderr)
	}
}
