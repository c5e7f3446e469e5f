//go:build linux

// Command hcsemu is the HCS emulator daemon: it serves internal/hcsemu on a unix socket so that
// runhcs's shim and tools run on Linux as they do against the Host Compute Service on Windows.
// With --tcp-address it also serves the same engine on a loopback TCP address, for the stand-in
// computecore.dll that Windows programs load under Wine (hack/wine); --tcp-address-file then
// names a file to write the address served to (useful with port 0). On SIGTERM or SIGINT it
// terminates every compute system (killing their processes and removing their cgroups) and
// exits 0.
//
//	hcsemu --address /run/hcsemu/hcsemu.sock [--tcp-address 127.0.0.1:0 --tcp-address-file FILE]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

func main() {
	var (
		address   = flag.String("address", wire.DefaultAddress, "unix socket to serve on")
		root      = flag.String("root", "/var/lib/hcsemu", "folder for the emulator's state")
		osVersion = flag.String("os-version", hcsemu.DefaultOSVersion, "the emulated host's Windows build (major.minor.build.revision)")
		logLevel  = flag.String("log-level", "info", "log level: trace, debug, info, warn, error")
		tcpAddr   = flag.String("tcp-address", "", "also serve on this loopback TCP address, host:port (port 0: any free port); loopback only, as the protocol has no authentication")
		tcpFile   = flag.String("tcp-address-file", "", "once ready, write the TCP address served to this file (needs --tcp-address)")
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
	addrs := hcsemu.Addresses{Unix: *address, TCP: *tcpAddr, TCPFile: *tcpFile}
	if *tcpAddr != "" {
		if err := hcsemu.ValidateTCPAddress(*tcpAddr); err != nil {
			fmt.Fprintf(os.Stderr, "hcsemu: %v\n", err)
			os.Exit(2)
		}
	} else if *tcpFile != "" {
		fmt.Fprintf(os.Stderr, "hcsemu: --tcp-address-file %q needs --tcp-address\n", *tcpFile)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := hcsemu.Run(ctx, hcsemu.Config{Root: *root, OSVersion: *osVersion}, addrs)
	if err != nil {
		log.G(ctx).WithError(err).Error("hcsemu")
		os.Exit(1)
	}
}
