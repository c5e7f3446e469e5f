//go:build linux

package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

const faultUsage = `usage: hcsemu fault [--address SOCK] VERB [ARGS…]

Injects faults into a running hcsemu daemon through its unix socket (never its TCP transport).
OP is an operation: create, open, close, enumerate, start, shutdown, terminate, pause, resume,
properties, modify, create-process, open-process, close-process, terminate-process,
signal-process, process-properties, modify-process, service-properties, or any wire method name
(HcnCreateEndpoint, ActivateLayer, …). Every verb prints the faults active afterwards.

  stall OP [--for DUR]              hold calls of OP until released (or for DUR); a caller that
                                    cancels (times out) gets its error at once
  release [OP]                      let the calls stalled on OP (or on every stall) proceed
  fail OP --hresult 0x… [--count N] fail the next N calls of OP (every call if N is 0) with
                                    the HRESULT, without running them
  crash SYSTEM_ID                   stop the compute system with an UnexpectedExit notification;
                                    its processes are killed (a VM: everything in it too)
  vm VM_ID [--boot-delay DUR] [--guest-hresult 0x…]
                                    slow the boot of utility VM VM_ID ("*": every VM), and fail
                                    its guest connection with the HRESULT; no flags clear them
  disconnect                        drop every other client connection of the daemon
  delay DUR                         make every call wait DUR first (0 ends it)
  list                              print the faults active
  clear                             end every fault; stalled calls proceed
`

// fault is `hcsemu fault --address SOCK VERB …`; it returns the exit code.
func fault(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fault", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, faultUsage) }
	address := fs.String("address", wire.DefaultAddress, "the unix socket of the daemon")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	verb, rest := fs.Arg(0), fs.Args()[1:]
	vfs := flag.NewFlagSet("fault "+verb, flag.ContinueOnError)
	vfs.SetOutput(stderr)
	vfs.Usage = func() { fmt.Fprint(stderr, faultUsage) }
	forDur := vfs.Duration("for", 0, "stall: release by itself after this long")
	hresult := vfs.String("hresult", "", "fail: the HRESULT, e.g. 0x80370109")
	count := vfs.Int("count", 0, "fail: how many calls fail (0: every call)")
	bootDelay := vfs.Duration("boot-delay", 0, "vm: how long the VM's start waits before it boots")
	guestHR := vfs.String("guest-hresult", "", "vm: fail the VM's guest connection with this HRESULT, e.g. 0x80370109")
	// Flags may come before or after the positional args.
	var pos []string
	for {
		if err := vfs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		if vfs.NArg() == 0 {
			break
		}
		pos = append(pos, vfs.Arg(0))
		rest = vfs.Args()[1:]
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "hcsemu fault %s: %s\n", verb, fmt.Sprintf(format, a...))
		return 2
	}
	want := map[string][2]int{ // verb: min and max positional args
		"stall": {1, 1}, "release": {0, 1}, "fail": {1, 1}, "crash": {1, 1},
		"disconnect": {0, 0}, "delay": {1, 1}, "list": {0, 0}, "clear": {0, 0}, "vm": {1, 1},
	}
	n, ok := want[verb]
	if !ok {
		fmt.Fprintf(stderr, "hcsemu fault: unknown verb %q\n", verb)
		fs.Usage()
		return 2
	}
	if len(pos) < n[0] || len(pos) > n[1] {
		return usage("wrong number of arguments %q; see hcsemu fault --help", pos)
	}
	var hr computecore.HRESULT
	if verb == "fail" {
		if *hresult == "" {
			return usage("--hresult is required")
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(*hresult), "0x"), 16, 32)
		if err != nil {
			return usage("--hresult %q is not a hexadecimal HRESULT", *hresult)
		}
		hr = computecore.HRESULT(v)
	}
	if verb == "vm" && *guestHR != "" {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(*guestHR), "0x"), 16, 32)
		if err != nil {
			return usage("--guest-hresult %q is not a hexadecimal HRESULT", *guestHR)
		}
		hr = computecore.HRESULT(v)
	}
	var delay time.Duration
	if verb == "delay" {
		var err error
		if delay, err = time.ParseDuration(pos[0]); err != nil {
			return usage("%v", err)
		}
	}

	f, err := client.DialFault(*address)
	if err != nil {
		fmt.Fprintf(stderr, "hcsemu fault: %v\n", err)
		return 1
	}
	defer f.Close()
	var r wire.FaultListReply
	switch verb {
	case "stall":
		r, err = f.Stall(pos[0], *forDur)
	case "release":
		op := ""
		if len(pos) == 1 {
			op = pos[0]
		}
		r, err = f.Release(op)
	case "fail":
		r, err = f.Fail(pos[0], hr, *count)
	case "crash":
		r, err = f.Crash(pos[0])
	case "disconnect":
		r, err = f.Disconnect()
	case "delay":
		r, err = f.Delay(delay)
	case "list":
		r, err = f.List()
	case "clear":
		r, err = f.Clear()
	case "vm":
		r, err = f.VM(pos[0], *bootDelay, hr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hcsemu fault %s: %v\n", verb, err)
		return 1
	}
	printFaults(stdout, r)
	return 0
}

// printFaults prints the active faults, one a line.
func printFaults(w io.Writer, r wire.FaultListReply) {
	if len(r.Stalls) == 0 && len(r.Fails) == 0 && r.DelayMs == 0 && len(r.VMs) == 0 {
		fmt.Fprintln(w, "no faults")
		return
	}
	for _, s := range r.Stalls {
		until := "until released"
		if s.Until != "" {
			until = "until " + s.Until
		}
		fmt.Fprintf(w, "stall %s (%s) %s, %d call(s) waiting\n", s.Op, s.Method, until, s.Waiting)
	}
	for _, f := range r.Fails {
		times := "every call"
		if f.Remaining > 0 {
			times = fmt.Sprintf("%d more call(s)", f.Remaining)
		}
		fmt.Fprintf(w, "fail %s (%s) with %v, %s\n", f.Op, f.Method, f.HResult, times)
	}
	if r.DelayMs > 0 {
		fmt.Fprintf(w, "delay %v on every call\n", time.Duration(r.DelayMs)*time.Millisecond)
	}
	for _, v := range r.VMs {
		fmt.Fprintf(w, "vm %s: boot delay %v", v.System, time.Duration(v.BootDelayMs)*time.Millisecond)
		if v.GuestHResult != 0 {
			fmt.Fprintf(w, ", guest connection fails with %v", v.GuestHResult)
		}
		fmt.Fprintln(w)
	}
}
