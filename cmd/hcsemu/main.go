//go:build linux

// Command hcsemu is the HCS emulator daemon: it serves internal/hcsemu on a unix socket so that
// runhcs's shim and tools run on Linux as they do against the Host Compute Service on Windows.
// With --tcp-address it also serves the same engine on a loopback TCP address, for the stand-in
// DLLs that Windows programs load under Wine (hack/wine); every TCP connection must first
// present the key the daemon writes (0600, new at every start) to --tcp-key-file, which is
// required with --tcp-address. --tcp-address-file names a file to write the address served
// to (useful with port 0); it is written last, once the daemon serves. On SIGTERM or SIGINT it
// terminates every compute system (killing their processes and removing their cgroups) and
// exits 0, having removed every HNS network, endpoint and namespace.
//
//	hcsemu --address /run/hcsemu/hcsemu.sock [--os-version V] [--host-memory-mb N] [--host-processors N] [--tcp-address 127.0.0.1:0 --tcp-key-file KEY [--tcp-address-file FILE]]
//
// `hcsemu hostns --root ROOT -- PROGRAM ARGS…` runs a program in the emulated Windows host's
// network namespace of the daemon using ROOT (where HNS networks are bridges with their
// gateways, as the Windows host sees its vSwitch): `nsenter --net=ROOT/netns/host` does the same.
//
// `hcsemu fault --address SOCK VERB …` injects faults into the daemon at SOCK (stall, release,
// fail, crash, disconnect, delay, list, clear; see fault.go or `hcsemu fault --help`).
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
	// The engine re-executes this binary as a container's silo init and a utility VM's init.
	if code, ok := hcsemu.Reexec(); ok {
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == "fault" {
		os.Exit(fault(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "hostns" {
		hostns(os.Args[2:])
		return
	}
	var (
		address   = flag.String("address", wire.DefaultAddress, "unix socket to serve on")
		root      = flag.String("root", "/var/lib/hcsemu", "folder for the emulator's state")
		osVersion = flag.String("os-version", hcsemu.DefaultOSVersion, "the emulated host's Windows build (major.minor.build.revision)")
		hostMem   = flag.Uint64("host-memory-mb", 0, "the emulated host's memory for utility VMs, in MB; a VM that does not fit is refused (0: this machine's)")
		hostCPUs  = flag.Int("host-processors", 0, "the emulated host's logical processors (service property ProcessorTopology; 0: this machine's)")
		logLevel  = flag.String("log-level", "info", "log level: trace, debug, info, warn, error")
		tcpAddr   = flag.String("tcp-address", "", "also serve on this loopback TCP address, host:port (port 0: any free port); needs --tcp-key-file")
		tcpFile   = flag.String("tcp-address-file", "", "once ready, write the TCP address served to this file (needs --tcp-address)")
		tcpKey    = flag.String("tcp-key-file", "", "write the key every TCP connection must present to this file (mode 0600, a new key at every start; needs --tcp-address)")
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
	addrs := hcsemu.Addresses{Unix: *address, TCP: *tcpAddr, TCPFile: *tcpFile, TCPKeyFile: *tcpKey}
	if err := addrs.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "hcsemu: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := hcsemu.Run(ctx, hcsemu.Config{Root: *root, OSVersion: *osVersion, HostMemoryMB: *hostMem, HostProcessors: *hostCPUs}, addrs)
	if err != nil {
		log.G(ctx).WithError(err).Error("hcsemu")
		os.Exit(1)
	}
}

// hostns is `hcsemu hostns --root ROOT -- PROGRAM ARGS…`.
func hostns(args []string) {
	fs := flag.NewFlagSet("hostns", flag.ExitOnError)
	root := fs.String("root", "/var/lib/hcsemu", "the --root of the running daemon")
	fs.Parse(args)
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "hcsemu hostns: usage: hcsemu hostns [--root ROOT] -- PROGRAM [ARGS…]")
		os.Exit(2)
	}
	err := hcsemu.ExecInHostNetns(*root, fs.Args())
	fmt.Fprintf(os.Stderr, "hcsemu hostns: %v\n", err)
	os.Exit(1)
}
