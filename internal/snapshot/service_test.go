package snapshot

import (
	"context"
	"reflect"
	"testing"

	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/core/diff"
	diffproxy "github.com/containerd/containerd/v2/core/diff/proxy"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	snproxy "github.com/containerd/containerd/v2/core/snapshots/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// TestGRPC talks to the services through containerd's own proxy clients, as containerd's
// proxy_plugins do: mounts must cross the wire unchanged and errors keep their kinds.
func TestGRPC(t *testing.T) {
	requireRoot(t)
	ctx := namespaces.WithNamespace(context.Background(), "test")
	sn := newSnapshotter(t)
	cs := newStore(t)
	l, target := testListener(t)
	server := grpc.NewServer()
	Register(server, sn, NewDiffer(cs, testLayers))
	go server.Serve(l)
	defer server.Stop()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	remote := snproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), "wcow")
	differ := diffproxy.NewDiffApplier(diffapi.NewDiffClient(conn)).(interface {
		diff.Applier
		diff.Comparer
	})

	m, err := remote.Prepare(ctx, "extract-1 base", "")
	if err != nil {
		t.Fatal(err)
	}
	tarb := layerTar(t, file{"Files/hello.txt", "hi"})
	applied, err := differ.Apply(ctx, gzipBlob(t, cs, tarb), m)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Size != int64(len(tarb)) {
		t.Fatalf("Apply over gRPC = %+v", applied)
	}
	if err := remote.Commit(ctx, "base", "extract-1 base"); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Prepare(ctx, "ctr", "base")
	if err != nil {
		t.Fatal(err)
	}
	direct, err := sn.Mounts(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, direct) {
		t.Fatalf("mounts over gRPC %#v\ndiffer from %#v", got, direct)
	}
	lm, _ := ParseMounts(got)
	if _, err := testLayers.Mount(ctx, lm.Source, lm.Parents); err != nil {
		t.Fatal(err)
	}
	defer testLayers.Unmount(ctx, lm.Source)
	if err := remote.Remove(ctx, "ctr"); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Remove of a mounted snapshot over gRPC = %v, want failed precondition", err)
	}
	if _, err := differ.Apply(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer}, []mount.Mount{{Type: "overlay"}}); !errdefs.IsNotImplemented(err) {
		t.Fatalf("Apply on overlay mounts over gRPC = %v, want not implemented", err)
	}
	if _, err := remote.Stat(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Fatalf("Stat of a missing snapshot = %v", err)
	}
}

// TestForward checks that the namespace and lease containerd sends come out again on calls to
// its content service.
func TestForward(t *testing.T) {
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs("containerd-namespace", "k8s.io", "containerd-lease", "lease-1"))
	md, _ := metadata.FromOutgoingContext(forward(in))
	if got := md.Get("containerd-namespace"); len(got) != 1 || got[0] != "k8s.io" {
		t.Fatalf("outgoing namespace = %v", got)
	}
	if got := md.Get("containerd-lease"); len(got) != 1 || got[0] != "lease-1" {
		t.Fatalf("outgoing lease = %v", got)
	}
	if _, ok := leases.FromContext(forward(context.Background())); ok {
		t.Fatal("lease made up from nothing")
	}
}
