// Command hcsemu is the HCS emulator daemon: it serves internal/hcsemu on a unix socket so that
// runhcs's shim and tools run on Linux as they do against the Host Compute Service on Windows.
// On SIGTERM or SIGINT it terminates every compute system (killing their processes and removing
// their cgroups) and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu"
)

func main() {
	var (
		address   = flag.String("address", computecore.DefaultAddress, "unix socket to serve on")
		root      = flag.String("root", "/var/lib/hcsemu", "folder for the emulator's state")
		osVersion = flag.String("os-version", hcsemu.DefaultOSVersion, "the emulated host's Windows build (major.minor.build.revision)")
		logLevel  = flag.String("log-level", "info", "log level: trace, debug, info, warn, error")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "hcsemu: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := log.SetLevel(*logLevel); err != nil {
		fmt.Fprintf(os.Stderr, "hcsemu: --log-level %q: %v\n", *logLevel, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := hcsemu.Run(ctx, hcsemu.Config{Root: *root, OSVersion: *osVersion}, *address)
	if err != nil {
		log.G(ctx).WithError(err).Error("hcsemu")
		os.Exit(1)
	}
}
