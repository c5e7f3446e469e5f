package snapshot

import (
	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/contrib/diffservice"
	"github.com/containerd/containerd/v2/contrib/snapshotservice"
	"google.golang.org/grpc"
)

// Register serves sn as containerd.services.snapshots.v1.Snapshots and d as
// containerd.services.diff.v1.Diff on server, so one socket serves both proxy plugins.
func Register(server *grpc.Server, sn *Snapshotter, d *Differ) {
	snapshotsapi.RegisterSnapshotsServer(server, snapshotservice.FromSnapshotter(sn))
	diffapi.RegisterDiffServer(server, diffservice.FromApplierAndComparer(d, d))
}
