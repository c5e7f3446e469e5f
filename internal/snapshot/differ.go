package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// ContentStore is what the differ needs of containerd's content store: reading layer blobs
// (Apply) and writing new ones (Compare).
type ContentStore interface {
	content.Provider
	content.Ingester
}

// Differ applies and creates Windows layer diffs on windows-layer mounts.
type Differ struct {
	store  ContentStore
	layers *wclayer.Layers
}

var (
	_ diff.Applier  = (*Differ)(nil)
	_ diff.Comparer = (*Differ)(nil)
)

// NewDiffer returns a differ over store. A nil store makes Apply and Compare fail with
// errdefs.ErrUnavailable.
func NewDiffer(store ContentStore, layers *wclayer.Layers) *Differ {
	return &Differ{store: store, layers: layers}
}

// LabelUncompressed is the content label holding a blob's uncompressed digest (containerd's
// labels.LabelUncompressed).
const LabelUncompressed = "containerd.io/uncompressed"

// forward turns the namespace and lease of an incoming gRPC call (containerd sets them as
// metadata) into outgoing ones for calls to containerd's content service.
func forward(ctx context.Context) context.Context {
	if ns, ok := namespaces.Namespace(ctx); ok {
		ctx = namespaces.WithNamespace(ctx, ns)
	}
	if l, ok := leases.FromContext(ctx); ok {
		ctx = leases.WithLease(ctx, l)
	}
	return ctx
}

func (d *Differ) storeOrErr() (ContentStore, error) {
	if d.store == nil || (reflect.ValueOf(d.store).Kind() == reflect.Pointer && reflect.ValueOf(d.store).IsNil()) {
		return nil, fmt.Errorf("no content store configured for the Windows layer differ: %w", errdefs.ErrUnavailable)
	}
	return d.store, nil
}

// Apply imports the layer blob desc into the active snapshot folder of mounts and returns the
// descriptor of the uncompressed tar.
func (d *Differ) Apply(ctx context.Context, desc ocispec.Descriptor, mounts []mount.Mount, opts ...diff.ApplyOpt) (ocispec.Descriptor, error) {
	lm, err := ParseMounts(mounts)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var config diff.ApplyConfig
	for _, o := range opts {
		if err := o(ctx, desc, &config); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("apply option: %w", err)
		}
	}
	if _, err := images.DiffCompression(ctx, desc.MediaType); err != nil || strings.HasSuffix(desc.MediaType, "+encrypted") {
		return ocispec.Descriptor{}, fmt.Errorf("layer %s of media type %q: %w", desc.Digest, desc.MediaType, errdefs.ErrNotImplemented)
	}
	if lm.ReadOnly {
		return ocispec.Descriptor{}, fmt.Errorf("applying layer %s to %s: the mount is read-only: %w", desc.Digest, lm.Source, errdefs.ErrInvalidArgument)
	}
	if err := inUse(d.layers, lm.Source, lm.Source, "apply a layer to"); err != nil {
		return ocispec.Descriptor{}, err
	}
	store, err := d.storeOrErr()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	ra, err := store.ReaderAt(forward(ctx), desc)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("reading layer %s from the content store: %w", desc.Digest, err)
	}
	defer ra.Close()
	// DecompressStream detects gzip and zstd by their magic numbers, so foreign and
	// non-distributable Windows base layers (application/vnd.docker.image.rootfs.foreign...)
	// are read like the others.
	rc, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("decompressing layer %s: %w", desc.Digest, err)
	}
	defer rc.Close()
	digester := digest.Canonical.Digester()
	counted := &countingReader{r: io.TeeReader(rc, digester.Hash())}
	if _, err := d.layers.ImportLayer(ctx, counted, lm.Source, lm.Parents, wclayer.ImportOptions{Sync: config.SyncFs}); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("applying layer %s: %w", desc.Digest, err)
	}
	// The tar's end-of-archive blocks and any padding belong to the diff ID too.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("reading the rest of layer %s: %w", desc.Digest, err)
	}
	applied := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digester.Digest(), Size: counted.n}
	log.G(ctx).WithFields(log.Fields{"layer": desc.Digest, "diffID": applied.Digest, "snapshot": lm.Source}).Debug("applied layer")
	return applied, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Compare writes the changes of the snapshot upper over lower (its parent chain) as an OCI
// Windows layer to the content store. upper is an active snapshot's mount, or a view of a
// committed one (then the diff is of the layer the view shows on top). The tar's entries keep their own times, so
// SourceDateEpoch is not applied.
func (d *Differ) Compare(ctx context.Context, lower, upper []mount.Mount, opts ...diff.Opt) (ocispec.Descriptor, error) {
	um, err := ParseMounts(upper)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var chain []string
	if len(lower) > 0 {
		lm, err := ParseMounts(lower)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		chain = lm.Parents
		if !lm.ReadOnly {
			chain = append([]string{lm.Source}, lm.Parents...)
		}
	}
	// The layer whose changes are wanted: an active snapshot's own folder, or, for a view
	// (what containerd's rootfs.CreateDiff mounts for a committed snapshot), the committed
	// layer it shows on top.
	layer, parents := um.Source, um.Parents
	if um.ReadOnly {
		if len(um.Parents) == 0 {
			return ocispec.Descriptor{}, fmt.Errorf("comparing view %s: it shows no layer: %w", um.Source, errdefs.ErrInvalidArgument)
		}
		layer, parents = um.Parents[0], um.Parents[1:]
	}
	if !equalPaths(chain, parents) {
		return ocispec.Descriptor{}, fmt.Errorf("comparing %s: its parents %v are not the lower layers %v: %w", layer, parents, chain, errdefs.ErrInvalidArgument)
	}
	var config diff.Config
	for _, o := range opts {
		if err := o(&config); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("diff option: %w", err)
		}
	}
	if config.MediaType == "" {
		config.MediaType = ocispec.MediaTypeImageLayerGzip
	}
	var comp compression.Compression
	switch config.MediaType {
	case ocispec.MediaTypeImageLayer:
		comp = compression.Uncompressed
	case ocispec.MediaTypeImageLayerGzip:
		comp = compression.Gzip
	case ocispec.MediaTypeImageLayerZstd:
		comp = compression.Zstd
	default:
		return ocispec.Descriptor{}, fmt.Errorf("diff media type %q: %w", config.MediaType, errdefs.ErrNotImplemented)
	}
	store, err := d.storeOrErr()
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	ref := config.Reference
	if ref == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		ref = "wcow-diff-" + hex.EncodeToString(b[:])
	}
	fctx := forward(ctx)
	cw, err := content.OpenWriter(fctx, store, content.WithRef(ref))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("opening content writer %s: %w", ref, err)
	}
	defer cw.Close()
	if err := cw.Truncate(0); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("content writer %s: %w", ref, err)
	}
	compressed := &countingWriter{w: cw}
	zw, err := compression.CompressStream(compressed, comp)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	digester := digest.Canonical.Digester()
	if err := d.layers.ExportLayer(ctx, io.MultiWriter(zw, digester.Hash()), layer); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("diff of %s: %w", layer, err)
	}
	if err := zw.Close(); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("diff of %s: compressing: %w", layer, err)
	}
	labels := map[string]string{}
	for k, v := range config.Labels {
		labels[k] = v
	}
	labels[LabelUncompressed] = digester.Digest().String()
	dgst := cw.Digest()
	if err := cw.Commit(fctx, compressed.n, dgst, content.WithLabels(labels)); err != nil && !errdefs.IsAlreadyExists(err) {
		return ocispec.Descriptor{}, fmt.Errorf("committing diff of %s to the content store: %w", layer, err)
	}
	return ocispec.Descriptor{MediaType: config.MediaType, Size: compressed.n, Digest: dgst}, nil
}

func equalPaths(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
