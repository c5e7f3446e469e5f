package bench

import (
	"archive/tar"
	"bytes"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// linuxWorkloadPath is where the Linux image holds the workload.
const linuxWorkloadPath = "/workload"

// imageTime fixes every timestamp, so the same workload gives the same digests.
var imageTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// linuxImage returns an OCI image layout tarball of a linux/amd64 image named name: one
// uncompressed layer holding workload at /workload (mode 0755) and nothing else, and a config
// whose command is `/workload echo x`. It is the Linux twin of test/image's Windows test image:
// the same binary, so runc and runhcs run the same program. Uncompressed, as the Windows test
// image's layer is gzip but small; neither side's unpack is measured.
func linuxImage(name string, workload []byte) ([]byte, error) {
	if len(workload) == 0 {
		return nil, errors.New("linux image: the workload binary is empty")
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	hdr := &tar.Header{Name: linuxWorkloadPath[1:], Mode: 0o755, Size: int64(len(workload)), ModTime: imageTime, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(workload); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	blobs := map[digest.Digest][]byte{}
	add := func(mediaType string, b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		blobs[d] = b
		return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
	}
	layerDesc := add(ocispec.MediaTypeImageLayer, layer.Bytes())

	platform := ocispec.Platform{OS: "linux", Architecture: "amd64"}
	created := imageTime
	config, err := json.Marshal(ocispec.Image{
		Created:  &created,
		Platform: platform,
		Config: ocispec.ImageConfig{
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{linuxWorkloadPath, "echo", "x"},
		},
		// Uncompressed: the diff id is the layer blob's digest.
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	})
	if err != nil {
		return nil, err
	}
	configDesc := add(ocispec.MediaTypeImageConfig, config)
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return nil, err
	}
	manifestDesc := add(ocispec.MediaTypeImageManifest, manifest)
	manifestDesc.Platform = &platform
	// containerd's importer names the image after this annotation (as test/image does).
	manifestDesc.Annotations = map[string]string{"io.containerd.image.name": name}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifestDesc},
	})
	if err != nil {
		return nil, err
	}
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return nil, err
	}

	var out bytes.Buffer
	ow := tar.NewWriter(&out)
	put := func(name string, b []byte) error {
		if err := ow.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: imageTime, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("linux image: tar entry %s: %w", name, err)
		}
		_, err := ow.Write(b)
		return err
	}
	if err := put(ocispec.ImageLayoutFile, layout); err != nil {
		return nil, err
	}
	if err := put(ocispec.ImageIndexFile, index); err != nil {
		return nil, err
	}
	for _, d := range []digest.Digest{layerDesc.Digest, configDesc.Digest, manifestDesc.Digest} {
		if err := put("blobs/"+d.Algorithm().String()+"/"+d.Encoded(), blobs[d]); err != nil {
			return nil, err
		}
	}
	if err := ow.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// readTar returns the regular files of a tar by name, with their headers.
func readTar(t *testing.T, b []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, hdrs := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		files[h.Name], hdrs[h.Name] = data, h
	}
}

func TestLinuxImage(t *testing.T) {
	const name = "docker.io/runhcs/bench-linux:test"
	workload := []byte("\x7fELF pretend workload")
	b, err := linuxImage(name, workload)
	if err != nil {
		t.Fatal(err)
	}
	again, err := linuxImage(name, workload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("two images of the same workload differ: the writer is not reproducible")
	}

	files, _ := readTar(t, b)
	blob := func(d digest.Digest) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+d.Encoded()]
		if !ok {
			t.Fatalf("blob %s is not in the layout", d)
		}
		if got := digest.FromBytes(data); got != d {
			t.Fatalf("blob %s has digest %s", d, got)
		}
		return data
	}
	var index ocispec.Index
	if err := json.Unmarshal(files[ocispec.ImageIndexFile], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
	}
	md := index.Manifests[0]
	var manifest ocispec.Manifest
	if err := json.Unmarshal(blob(md.Digest), &manifest); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var config ocispec.Image
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	layerFiles, layerHdrs := readTar(t, blob(manifest.Layers[0].Digest))

	checks := []struct {
		what      string
		got, want any
	}{
		{"layout version", string(files[ocispec.ImageLayoutFile]), `{"imageLayoutVersion":"1.0.0"}`},
		{"image name annotation", md.Annotations["io.containerd.image.name"], name},
		{"index platform", md.Platform.OS + "/" + md.Platform.Architecture, "linux/amd64"},
		{"config platform", config.OS + "/" + config.Architecture, "linux/amd64"},
		{"layer count", len(manifest.Layers), 1},
		{"layer media type", manifest.Layers[0].MediaType, ocispec.MediaTypeImageLayer},
		{"diff ids", fmt.Sprint(config.RootFS.DiffIDs), fmt.Sprint([]digest.Digest{manifest.Layers[0].Digest})},
		{"command", fmt.Sprint(config.Config.Cmd), fmt.Sprint([]string{"/workload", "echo", "x"})},
		{"files in the layer", len(layerFiles), 1},
		{"workload content", string(layerFiles["workload"]), string(workload)},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if h := layerHdrs["workload"]; h == nil || h.Mode != 0o755 {
		t.Errorf("workload entry %+v: want mode 0755", h)
	}

	if _, err := linuxImage(name, nil); err == nil {
		t.Error("an empty workload was accepted")
	}
}
