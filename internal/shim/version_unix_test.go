//go:build !windows

package shim

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// fakeVersion serves containerd.services.version.v1.Version with a fixed version, as containerd
// serves it on its gRPC address.
type fakeVersion struct {
	versionapi.UnimplementedVersionServer
	version string
}

func (f fakeVersion) Version(context.Context, *emptypb.Empty) (*versionapi.VersionResponse, error) {
	return &versionapi.VersionResponse{Version: f.version, Revision: "test"}, nil
}

// TestContainerdVersion: the start action reads containerd's version from its version service
// at -address (a socket path or a unix:// URL), and gets "" (so version 2) when nothing answers.
func TestContainerdVersion(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	versionapi.RegisterVersionServer(s, fakeVersion{version: "v2.4.2"})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	for _, address := range []string{sock, "unix://" + sock} {
		if got := containerdVersion(context.Background(), address); got != "v2.4.2" {
			t.Errorf("containerdVersion(%q) = %q, want v2.4.2", address, got)
		}
	}
	for _, address := range []string{"", filepath.Join(t.TempDir(), "none.sock")} {
		if got := containerdVersion(context.Background(), address); got != "" {
			t.Errorf("containerdVersion(%q) = %q with nothing serving, want \"\"", address, got)
		}
	}
}
