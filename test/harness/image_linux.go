package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/openhcs/runhcs/test/image"
)

// TestImage returns the default test image (image.Default with the Linux build of the workload)
// named name, for a test to change before ImportTestImage, and the workload, for the layers it
// adds (image.BaseLayer).
func TestImage(name string) (*image.Image, []byte, error) {
	wl, err := Workload()
	if err != nil {
		return nil, nil, err
	}
	img := image.Default(wl)
	img.Name = name
	return img, wl, nil
}

// ImportTestImage writes img as an image tarball under the environment's root and imports it
// with ImportImage.
func (e *Env) ImportTestImage(ctx context.Context, img *image.Image) error {
	return e.importTestImage(ctx, img, e.ImportImage)
}

// ImportTestImageTransfer is ImportTestImage through ImportImageTransfer (containerd's transfer
// service).
func (e *Env) ImportTestImageTransfer(ctx context.Context, img *image.Image) error {
	return e.importTestImage(ctx, img, e.ImportImageTransfer)
}

func (e *Env) importTestImage(ctx context.Context, img *image.Image, importer func(context.Context, string) error) error {
	dir := filepath.Join(e.Root, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, img.Name)
	p := filepath.Join(dir, file+".tar")
	if err := img.WriteFile(p); err != nil {
		return fmt.Errorf("write image %s: %w", img.Name, err)
	}
	if err := importer(ctx, p); err != nil {
		return fmt.Errorf("import %s: %w", img.Name, err)
	}
	return nil
}
