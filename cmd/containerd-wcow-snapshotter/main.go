// Command containerd-wcow-snapshotter serves runhcs's Windows-layer snapshotter and differ
// (internal/snapshot) to containerd as proxy plugins of type "snapshot" and "diff", both on
// one socket (a unix socket on Linux, a named pipe on Windows). See README.md for the
// containerd configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/log"
	"google.golang.org/grpc"

	"github.com/openhcs/runhcs/internal/snapshot"
	"github.com/openhcs/runhcs/internal/wclayer"
)

// stopTimeout bounds how long SIGTERM waits for calls under way (imports can be long) before
// it cuts them off.
const stopTimeout = 30 * time.Second

func main() {
	var (
		address    = flag.String("address", defaultAddress, "socket (named pipe on Windows) to serve the snapshots and diff services on")
		root       = flag.String("root", defaultRoot, "folder holding the snapshots and their metadata")
		logLevel   = flag.String("log-level", "info", "log level: trace, debug, info, warn, error, fatal or panic")
		containerd = flag.String("containerd-address", defaultContainerd, "containerd's socket, for its content store (layer blobs read by Apply, diffs written by Compare)")
	)
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	if err := log.SetLevel(*logLevel); err != nil {
		fmt.Fprintf(os.Stderr, "--log-level %q: %v\n", *logLevel, err)
		os.Exit(2)
	}
	if err := run(*address, *root, *containerd); err != nil {
		log.L.WithError(err).Error("containerd-wcow-snapshotter failed")
		os.Exit(1)
	}
}

// run serves until SIGTERM or an interrupt.
func run(address, root, containerdAddress string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return serve(ctx, address, root, containerdAddress)
}

// serve serves the snapshots and diff services on address until ctx is done, then stops as
// containerd's own plugins do: calls under way get stopTimeout to finish.
func serve(ctx context.Context, address, root, containerdAddress string) error {
	// One Layers for the snapshotter and the differ: the host's layer APIs (hcsshim's on
	// Windows), or the emulator's folders and overlayfs on Linux.
	layers := wclayer.New()
	sn, err := snapshot.NewSnapshotter(root, layers)
	if err != nil {
		return err
	}
	defer sn.Close()

	// grpc.NewClient does not connect until the first call, so the snapshotter starts
	// whether containerd is up yet or not.
	conn, err := dialContainerd(containerdAddress)
	if err != nil {
		return fmt.Errorf("containerd content store at %s: %w", containerdAddress, err)
	}
	defer conn.Close()
	differ := snapshot.NewDiffer(contentproxy.NewContentStore(contentapi.NewContentClient(conn)), layers)

	server := grpc.NewServer()
	snapshot.Register(server, sn, differ)
	l, err := listen(address)
	if err != nil {
		return err
	}
	log.G(ctx).WithFields(log.Fields{"address": address, "root": sn.Root(), "containerd": containerdAddress}).Info("serving snapshots and diff services")

	served := make(chan error, 1)
	go func() { served <- server.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", address, err)
	case <-ctx.Done():
	}
	log.G(ctx).Info("shutting down")
	done := make(chan struct{})
	go func() {
		server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		log.G(ctx).Warnf("calls still running after %s; stopping them", stopTimeout)
		server.Stop()
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
