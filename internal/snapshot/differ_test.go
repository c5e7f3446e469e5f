package snapshot

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestApplyMediaTypes applies one layer stored in each compression and media type a Windows
// image uses (Windows base layers are foreign/non-distributable layers).
func TestApplyMediaTypes(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	tarb := layerTar(t, file{"Files", "/"}, file{"Files/a.txt", "alpha"})
	tests := []struct {
		mediaType string
		comp      compression.Compression
	}{
		{ocispec.MediaTypeImageLayer, compression.Uncompressed},
		{ocispec.MediaTypeImageLayerGzip, compression.Gzip},
		{ocispec.MediaTypeImageLayerZstd, compression.Zstd},
		{images.MediaTypeDockerSchema2LayerForeignGzip, compression.Gzip},
		{images.MediaTypeDockerSchema2Layer, compression.Gzip}, // mislabelled: detected by magic
	}
	for _, tc := range tests {
		t.Run(tc.mediaType, func(t *testing.T) {
			sn := newSnapshotter(t)
			cs := newStore(t)
			var z bytes.Buffer
			w, err := compression.CompressStream(&z, tc.comp)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(tarb)
			w.Close()
			desc := ocispec.Descriptor{MediaType: tc.mediaType, Digest: digest.FromBytes(z.Bytes()), Size: int64(z.Len())}
			if err := content.WriteBlob(ctx, cs, "blob", bytes.NewReader(z.Bytes()), desc); err != nil {
				t.Fatal(err)
			}
			m, err := sn.Prepare(ctx, "extract-1", "")
			if err != nil {
				t.Fatal(err)
			}
			applied, err := NewDiffer(cs, testLayers).Apply(ctx, desc, m, diff.WithSyncFs(true))
			if err != nil {
				t.Fatal(err)
			}
			if applied.Digest != digest.FromBytes(tarb) || applied.Size != int64(len(tarb)) {
				t.Fatalf("Apply = %+v, want the digest and size of the tar", applied)
			}
			b, err := os.ReadFile(filepath.Join(m[0].Source, "Files", "a.txt"))
			if err != nil || string(b) != "alpha" {
				t.Fatalf("a.txt = %q, %v", b, err)
			}
		})
	}
}
