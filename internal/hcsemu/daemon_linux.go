package hcsemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/hcsemu/compute"
	"github.com/openhcs/runhcs/internal/hcsemu/server"
)

// The daemon's wiring (cmd/hcsemu): listeners, engine (internal/hcsemu/compute) and server
// (internal/hcsemu/server) started together, and torn down in reverse order.

// Run is the daemon: an engine served at addrs until ctx is done, then every system is
// terminated and the socket (and the TCP address and key files) removed.
func Run(ctx context.Context, cfg Config, addrs Addresses) error {
	if err := addrs.Validate(); err != nil {
		return err
	}
	// The socket first: a second daemon on the same address stops here, before its engine
	// touches anything.
	ln, err := server.Listen(addrs.Unix)
	if err != nil {
		return err
	}
	var tln net.Listener
	var key string
	if addrs.TCP != "" {
		if key, err = server.NewTCPKey(); err != nil {
			ln.Close()
			return err
		}
		if tln, err = server.ListenTCP(addrs.TCP); err != nil {
			ln.Close()
			return err
		}
	}
	closeListeners := func() {
		ln.Close()
		if tln != nil {
			tln.Close()
		}
	}
	e, err := compute.NewEngine(ctx, cfg)
	if err != nil {
		closeListeners()
		return err
	}
	fields := log.Fields{"address": addrs.Unix, "root": e.Config().Root, "osVersion": e.Config().OSVersion}
	if tln != nil {
		fields["tcpAddress"] = tln.Addr().String()
	}
	srv := server.NewServer(e)
	serving := 1
	done := make(chan error, 2)
	go func() { done <- srv.Serve(ctx, ln) }()
	if tln != nil {
		serving++
		go func() { done <- srv.ServeTCP(ctx, tln, key) }()
		// The key before the address file, which tells clients they can connect.
		err = server.WriteTCPKeyFile(addrs.TCPKeyFile, key)
	}
	// The address file last: it tells whoever waits for it that the daemon is ready.
	if err == nil && addrs.TCPFile != "" {
		if err = atomicfile.WriteFile(addrs.TCPFile, []byte(tln.Addr().String()), 0o644); err != nil {
			err = fmt.Errorf("--tcp-address-file: %w", err)
		}
	}
	if err == nil {
		log.G(ctx).WithFields(fields).Info("hcsemu: serving")
		select {
		case <-ctx.Done():
		case err = <-done:
			serving--
		}
	}
	closeListeners()
	for ; serving > 0; serving-- {
		err = errors.Join(err, <-done)
	}
	srv.Close()
	log.G(ctx).Info("hcsemu: shutting down: terminating every compute system")
	cerr := e.Close(context.WithoutCancel(ctx))
	os.Remove(addrs.Unix)
	if addrs.TCPFile != "" {
		os.Remove(addrs.TCPFile)
	}
	if addrs.TCPKeyFile != "" {
		// A stale key opens nothing (the next daemon makes its own), but it is a secret.
		os.Remove(addrs.TCPKeyFile)
	}
	return errors.Join(err, cerr)
}
