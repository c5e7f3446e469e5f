//go:build windows

package cri

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/test/image"
)

// TestPushImage pushes a freshly built Windows-format image (test/image) to the node's registry
// with go-containerregistry's remote package, the library crane and many OCI clients are built
// on, then pulls it through CRI by tag and by digest and runs it. The image's workload binary
// is the one the node's test image carries, fetched from the registry with the same package.
func TestPushImage(t *testing.T) {
	n := connect(t)
	reg := os.Getenv("RUNHCS_NODE_REGISTRY")
	opts := []remote.Option{remote.WithContext(ctx(t))}

	base, err := name.ParseReference(reg+"/runhcs/test:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(base, append(opts, remote.WithPlatform(v1.Platform{OS: "windows", Architecture: "amd64"}))...)
	if err != nil {
		t.Fatalf("fetch %s: %v", base, err)
	}
	workloadBin := layerFile(t, img, "Files/workload/workload.exe")

	// A new image: the standard one and a layer with a file unique to this run, so the push
	// uploads blobs the registry has not seen and the digest is new.
	marker := fmt.Sprintf("pushed by TestPushImage at %s", time.Now().UTC().Format(time.RFC3339Nano))
	built := image.Default(workloadBin)
	built.Name = reg + "/runhcs/pushed:v1"
	built.Cmd = []string{"cmd", "/c", `type C:\pushed.txt`}
	built.Layers = append(built.Layers, image.Layer{Comment: "pushed", Entries: []image.Entry{{Path: "Files/pushed.txt", Data: []byte(marker + "\r\n")}}})
	pushImg := ociLayoutImage(t, built)
	ref, err := name.ParseReference(built.Name, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, pushImg, opts...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	dgst, err := pushImg.Digest()
	if err != nil {
		t.Fatal(err)
	}
	byDigest := reg + "/runhcs/pushed@" + dgst.String()

	var id string
	for _, r := range []string{built.Name, byDigest} {
		got, err := n.img.PullImage(ctx(t), &runtimeapi.ImageSpec{Image: r}, nil, nil)
		if err != nil {
			t.Fatalf("PullImage %s: %v", r, err)
		}
		if id != "" && got != id {
			t.Fatalf("PullImage %s: image %s, want %s (the same as by tag)", r, got, id)
		}
		id = got
		st, err := n.img.ImageStatus(ctx(t), &runtimeapi.ImageSpec{Image: r}, false)
		if err != nil || st.GetImage().GetId() != id {
			t.Fatalf("ImageStatus %s: %+v, %v", r, st.GetImage(), err)
		}
		if r == byDigest && !contains(st.GetImage().GetRepoDigests(), byDigest) {
			t.Fatalf("ImageStatus %s: repo digests %q, want %s", r, st.GetImage().GetRepoDigests(), byDigest)
		}
	}
	t.Cleanup(func() { n.img.RemoveImage(ctx(t), &runtimeapi.ImageSpec{Image: id}) })

	// Run it by digest with the image's own command.
	pod, podCfg := runPod(t, n, "pod-pushed")
	cfg := containerConfig("pushed")
	cfg.Image = &runtimeapi.ImageSpec{Image: byDigest}
	cfg.Command = nil
	s := waitExited(t, n, startContainer(t, n, pod, podCfg, cfg))
	log, err := os.ReadFile(filepath.Join(podCfg.LogDirectory, cfg.LogPath))
	if err != nil {
		t.Fatal(err)
	}
	if s.GetExitCode() != 0 || !contains(logLines(string(log), "stdout"), marker) {
		t.Fatalf("container of %s: exit code %d, log %q; want 0 and %q", byDigest, s.GetExitCode(), log, marker)
	}
}

// layerFile reads a file from the first layer of img that has it.
func layerFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				t.Fatal(err)
			}
			if h.Name == path && h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		rc.Close()
	}
	t.Fatalf("no layer of the image has %s", path)
	return nil
}

// ociLayoutImage writes img as test/image does (an OCI image layout tarball), unpacks the
// layout into a folder and opens its one image with go-containerregistry's layout package,
// which keeps the blobs and the manifest byte for byte.
func ociLayoutImage(t *testing.T, img *image.Image) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	if err := img.WriteOCI(&buf); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "..") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the layout's index: %+v, %v; want one image", m, err)
	}
	out, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
