package shim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/api/types"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	leasesproxy "github.com/containerd/containerd/v2/core/leases/proxy"
	snapshotsproxy "github.com/containerd/containerd/v2/core/snapshots/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"

	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/shim/sandbox"
)

// A Hyper-V sandbox's boot image (sandbox.BootImage), through containerd's API at the address
// the shim was given. With the sandbox API no rootfs reaches the shim (containerd 2.4.2's
// internal/cri/server/sandbox_run.go calls CreateSandbox with only the pod's config and netns
// path), so the utility VM boots from the image the handler's runtime option sandbox_image
// names: the pause image, which the CRI still pulls and unpacks into the handler's snapshotter
// when disable_pause_image_pull is false (ensurePauseImageExists, called between CreateSandbox
// and StartSandbox; CRIImageService.PullImage unpacks for the handler's snapshotter, with
// platforms.DefaultSpec()). The shim resolves it as containerd's own client does: image →
// manifest for the default platform → config → rootfs diff IDs → chain ID, takes a read-only
// View of that snapshot under a lease of its own, and turns the view's windows-layer mount into
// the layer folders (layers.FromMounts) among which uvm.FindBootLayer finds the UtilityVM.

// bootLabelPrefix is the label containerd's unpacker puts on an image config for each
// snapshotter it unpacked the image into, valued with the chain ID (core/unpack/unpacker.go:
// "containerd.io/gc.ref.snapshot.<snapshotter>").
const bootLabelPrefix = "containerd.io/gc.ref.snapshot."

// bootName is the key of the view and the id of the lease a sandbox makes for its boot image:
// fixed by the sandbox id, so the delete action finds them even if the shim was killed
// between recording and making them.
func bootName(sandboxID string) string { return "runhcs-boot-" + sandboxID }

// containerdBoot is the boot image of one sandbox.
type containerdBoot struct {
	address, namespace, image, sandboxID string

	mu   sync.Mutex
	made *sandbox.BootRecord // what Acquire recorded, until released
}

var _ sandbox.BootImage = (*containerdBoot)(nil)

// newContainerdBoot checks the image reference and returns its boot image; ref is
// normalized as the CRI names the images it pulls (distribution's ParseDockerRef).
func newContainerdBoot(address, namespace, sandboxID, ref string) (*containerdBoot, error) {
	if address == "" {
		return nil, fmt.Errorf("the shim has no containerd address to find its boot image %q with: %w", ref, errdefs.ErrFailedPrecondition)
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return nil, fmt.Errorf("runtime option sandbox_image %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
	}
	return &containerdBoot{address: address, namespace: namespace, sandboxID: sandboxID, image: named.String()}, nil
}

func (b *containerdBoot) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, b.namespace)
}

// Acquire finds the image's snapshot, records the view and lease, then makes them.
func (b *containerdBoot) Acquire(ctx context.Context, record func(sandbox.BootRecord) error) ([]string, error) {
	conn, err := containerdConn(b.address)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx = b.ctx(ctx)
	snapshotter, chainID, err := b.resolve(ctx, conn)
	if err != nil {
		return nil, err
	}
	rec := sandbox.BootRecord{Image: b.image, Snapshotter: snapshotter, View: bootName(b.sandboxID), Lease: bootName(b.sandboxID)}
	if err := record(rec); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.made = &rec
	b.mu.Unlock()
	lm := leasesproxy.NewLeaseManager(leasesapi.NewLeasesClient(conn))
	if _, err := lm.Create(ctx, leases.WithID(rec.Lease), leases.WithLabel("containerd.io/runhcs.sandbox", b.sandboxID)); err != nil && !errdefs.IsAlreadyExists(err) {
		return nil, fmt.Errorf("lease %s: %w", rec.Lease, errgrpc.ToNative(err))
	}
	sn := snapshotsproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), snapshotter)
	mounts, err := sn.View(leases.WithLease(ctx, rec.Lease), rec.View, chainID)
	if errdefs.IsAlreadyExists(err) {
		// Made by an earlier, failed Start of this sandbox.
		mounts, err = sn.Mounts(ctx, rec.View)
	}
	if err != nil {
		return nil, fmt.Errorf("view %s of image %s's snapshot %s in snapshotter %s: %w", rec.View, b.image, chainID, snapshotter, errgrpc.ToNative(err))
	}
	tm := make([]*types.Mount, 0, len(mounts))
	for _, m := range mounts {
		tm = append(tm, &types.Mount{Type: m.Type, Source: m.Source, Options: m.Options})
	}
	chain, err := layers.FromMounts(tm)
	if err != nil {
		return nil, fmt.Errorf("view %s of image %s: %w", rec.View, b.image, err)
	}
	// The view's own folder is not one of the image's layers; its parents are, nearest first.
	return chain.Parents, nil
}

// resolve finds the image's top snapshot (its chain ID) and a snapshotter that holds it.
func (b *containerdBoot) resolve(ctx context.Context, conn *grpc.ClientConn) (snapshotter, chainID string, _ error) {
	img, err := imagesapi.NewImagesClient(conn).Get(ctx, &imagesapi.GetImageRequest{Name: b.image})
	if err != nil {
		err = errgrpc.ToNative(err)
		if errdefs.IsNotFound(err) {
			return "", "", fmt.Errorf("image %s (runtime option sandbox_image) is not in containerd's namespace %s: the CRI pulls it only with disable_pause_image_pull = false and when it is the CRI's sandbox image: %w", b.image, b.namespace, errdefs.ErrFailedPrecondition)
		}
		return "", "", fmt.Errorf("image %s: %w", b.image, err)
	}
	t := img.GetImage().GetTarget()
	target := ocispec.Descriptor{MediaType: t.GetMediaType(), Digest: digest.Digest(t.GetDigest()), Size: t.GetSize()}
	cs := contentproxy.NewContentStore(contentapi.NewContentClient(conn))
	// The same platform as the CRI's unpack (image_pull.go: platforms.DefaultSpec()).
	cfg, err := images.Config(ctx, cs, target, platforms.Default())
	if err != nil {
		return "", "", fmt.Errorf("image %s: config for platform %s: %w", b.image, platforms.DefaultString(), errgrpc.ToNative(err))
	}
	diffIDs, err := images.RootFS(ctx, cs, cfg)
	if err != nil {
		return "", "", fmt.Errorf("image %s: rootfs: %w", b.image, errgrpc.ToNative(err))
	}
	chainID = identity.ChainID(diffIDs).String()
	info, err := cs.Info(ctx, cfg.Digest)
	if err != nil {
		return "", "", fmt.Errorf("image %s: config %s: %w", b.image, cfg.Digest, errgrpc.ToNative(err))
	}
	var names []string
	for k, v := range info.Labels {
		if name, ok := strings.CutPrefix(k, bootLabelPrefix); ok && v == chainID {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", "", fmt.Errorf("image %s is not unpacked into any snapshotter (no %s* label on its config %s): %w", b.image, bootLabelPrefix, cfg.Digest, errdefs.ErrFailedPrecondition)
	}
	// Every unpack of the image holds the same layers; choose one the same way each time.
	slices.Sort(names)
	return names[0], chainID, nil
}

// Release removes the view, then its lease.
func (b *containerdBoot) Release(ctx context.Context) error {
	b.mu.Lock()
	rec := b.made
	b.mu.Unlock()
	if rec == nil {
		return nil
	}
	if err := releaseBoot(b.ctx(ctx), b.address, *rec); err != nil {
		return err
	}
	b.mu.Lock()
	b.made = nil
	b.mu.Unlock()
	return nil
}

// releaseBoot removes a recorded view and its lease; either already gone is no error. The view
// is removed itself rather than left to the garbage collector, so that nothing is left once
// RemovePodSandbox returns.
func releaseBoot(ctx context.Context, address string, rec sandbox.BootRecord) error {
	conn, err := containerdConn(address)
	if err != nil {
		return err
	}
	defer conn.Close()
	if rec.Snapshotter != "" {
		sn := snapshotsproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), rec.Snapshotter)
		if err := sn.Remove(ctx, rec.View); err != nil && !errdefs.IsNotFound(errgrpc.ToNative(err)) {
			return fmt.Errorf("remove view %s in snapshotter %s: %w", rec.View, rec.Snapshotter, errgrpc.ToNative(err))
		}
	}
	lm := leasesproxy.NewLeaseManager(leasesapi.NewLeasesClient(conn))
	if err := lm.Delete(ctx, leases.Lease{ID: rec.Lease}); err != nil && !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		return fmt.Errorf("delete lease %s: %w", rec.Lease, errgrpc.ToNative(err))
	}
	return nil
}
