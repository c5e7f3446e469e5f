package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openhcs/runhcs/test/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("o", "", "output tarball (required)")
	workload := flag.String("workload", "", "workload binary to put in the image (default: build test/workload for linux/amd64)")
	name := flag.String("name", image.DefaultName, "image reference the import names the image")
	osVersion := flag.String("os-version", image.DefaultOSVersion, "config os.version, also recorded in the base layer (image.OSBuildFile)")
	uncompressed := flag.Bool("uncompressed", false, "write uncompressed layers (application/vnd.oci.image.layer.v1.tar)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		return fmt.Errorf("-o is required and no arguments are taken")
	}
	bin := *workload
	if bin == "" {
		tmp, err := os.MkdirTemp("", "mkimage-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "workload.exe")
		if err := image.BuildWorkload(context.Background(), "linux", "amd64", bin); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read workload: %w", err)
	}
	img := image.Default(data)
	img.Name = *name
	img.OSVersion = *osVersion
	// The base layer records its build too (image.OSBuildFile), as the emulator reads it.
	img.Layers[0] = image.BaseLayer(data, image.BaseOptions{UtilityVM: true, OSVersion: *osVersion})
	for i := range img.Layers {
		img.Layers[i].Uncompressed = *uncompressed
	}
	return img.WriteFile(*out)
}
