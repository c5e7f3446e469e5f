package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// file is an entry of a test layer; a whiteout is a name with .wh.
type file struct{ name, body string }

var epoch = time.Date(2022, 3, 4, 5, 6, 7, 890123456, time.UTC)

// layerTar writes a Windows layer tar in backuptar's shape (PAX, Windows records).
func layerTar(tb testing.TB, files ...file) []byte {
	tb.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{
			Format: tar.FormatPAX, Name: f.name, Typeflag: tar.TypeReg, Mode: 0o100000, Size: int64(len(f.body)),
			ModTime: epoch, AccessTime: epoch, ChangeTime: epoch,
			PAXRecords: map[string]string{"MSWINDOWS.fileattr": "32", "LIBARCHIVE.creationtime": "1646370367"},
		}
		if f.body == "/" {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o040000, 0
			h.PAXRecords["MSWINDOWS.fileattr"] = "16"
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := io.WriteString(tw, f.body); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// gzipBlob compresses b and writes it to cs, returning its descriptor.
func gzipBlob(tb testing.TB, cs content.Store, b []byte) ocispec.Descriptor {
	tb.Helper()
	var z bytes.Buffer
	w, err := compression.CompressStream(&z, compression.Gzip)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromBytes(z.Bytes()), Size: int64(z.Len())}
	if err := content.WriteBlob(context.Background(), cs, desc.Digest.String(), bytes.NewReader(z.Bytes()), desc); err != nil {
		tb.Fatal(err)
	}
	return desc
}

func newStore(tb testing.TB) content.Store {
	tb.Helper()
	cs, err := local.NewLabeledStore(tb.TempDir(), &memLabels{m: map[digest.Digest]map[string]string{}})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

func newSnapshotter(tb testing.TB) *Snapshotter {
	tb.Helper()
	sn, err := NewSnapshotter(tb.TempDir(), testLayers)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sn.Close() })
	return sn
}

// blobEntries reads the tar (decompressing it) of desc from cs: name -> content.
func blobEntries(tb testing.TB, cs content.Store, desc ocispec.Descriptor) map[string]string {
	tb.Helper()
	ra, err := cs.ReaderAt(context.Background(), desc)
	if err != nil {
		tb.Fatal(err)
	}
	defer ra.Close()
	rc, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// memLabels is an in-memory local.LabelStore (containerd keeps labels in its metadata DB).
type memLabels struct {
	mu sync.Mutex
	m  map[digest.Digest]map[string]string
}

func (l *memLabels) Get(d digest.Digest) (map[string]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[d], nil
}

func (l *memLabels) Set(d digest.Digest, labels map[string]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[d] = labels
	return nil
}

func (l *memLabels) Update(d digest.Digest, labels map[string]string) (map[string]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[d] == nil {
		l.m[d] = map[string]string{}
	}
	for k, v := range labels {
		if v == "" {
			delete(l.m[d], k)
		} else {
			l.m[d][k] = v
		}
	}
	return l.m[d], nil
}
