//go:build windows

package cri

import (
	"context"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/Microsoft/go-winio"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// bootObjects lists what a Hyper-V pod of the shim sandboxer holds in containerd for its VM's
// boot image (docs/sandbox-api.md): the lease and the view in the wcow snapshotter the shim
// names runhcs-boot-<pod id> (internal/shim/bootimage.go). It asks containerd's own API on
// the node's pipe, where containerd serves it beside the CRI, in the CRI's namespace k8s.io
// (the namespace travels as the gRPC header containerd-namespace, as containerd's client
// sends it: pkg/namespaces/grpc.go).
func bootObjects(t *testing.T, pod string) (lease, view bool) {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///containerd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return winio.DialPipeContext(ctx, os.Getenv("RUNHCS_NODE_PIPE"))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := metadata.AppendToOutgoingContext(ctx(t), "containerd-namespace", "k8s.io")
	name := "runhcs-boot-" + pod
	ls, err := leasesapi.NewLeasesClient(conn).List(c, &leasesapi.ListRequest{})
	if err != nil {
		t.Fatalf("containerd leases: %v", err)
	}
	lease = slices.ContainsFunc(ls.GetLeases(), func(l *leasesapi.Lease) bool { return l.GetID() == name })
	_, err = snapshotsapi.NewSnapshotsClient(conn).Stat(c, &snapshotsapi.StatSnapshotRequest{Snapshotter: "wcow", Key: name})
	return lease, err == nil
}
