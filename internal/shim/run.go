package shim

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	cshim "github.com/containerd/containerd/v2/pkg/shim"

	"github.com/openhcs/runhcs/internal/hostprocess"
)

// RuntimeName is the runtime type containerd knows this shim by.
const RuntimeName = "io.containerd.runhcs.v1"

// Run is the shim binary's main: it runs the `start` action itself (see start.go for why) and
// hands everything else — `delete`, serving the task API, logging, events — to containerd's
// shim package.
func Run(ctx context.Context) {
	// A HostProcess job's keeper is this binary re-executed (internal/hostprocess keeper): it
	// must become the keeper before anything of the shim runs.
	hostprocess.Reexec()
	if f, ok := parseStartFlags(os.Args[1:]); ok {
		if err := start(ctx, f, os.Stdin, os.Stdout, defaultLauncher().startOrJoin, containerdVersion); err != nil {
			fmt.Fprintf(os.Stderr, "%s: start: %s\n", RuntimeName, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	registerPlugins()
	cshim.RunShim(ctx, &manager{name: RuntimeName}, func(c *cshim.Config) {
		// The shim's processes live in HCS, not as its children; the only children are
		// logging binaries, which it waits for itself (a reaper would steal their exit).
		c.NoReaper = true
		c.NoSubreaper = true
	})
}

// startFlags are the command line of the start action, as containerd 1.7 and 2.x pass it
// (the flags of containerd's shim package).
// -publish-binary, -bundle and -socket are accepted but not kept: the start action finds the
// bundle as its working directory and chooses the socket itself.
type startFlags struct {
	namespace, id, address string
	debug                  bool
	// options are the runtime options read from stdin (a marshalled Any), kept for a sandbox
	// bundle (recordSandboxOptions).
	options string
}

// parseStartFlags reports whether args are a start action, and its flags.
func parseStartFlags(args []string) (startFlags, bool) {
	var f startFlags
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&f.debug, "debug", false, "")
	var b bool
	fs.BoolVar(&b, "v", false, "")
	fs.BoolVar(&b, "version", false, "")
	fs.BoolVar(&b, "info", false, "")
	fs.StringVar(&f.namespace, "namespace", "", "")
	fs.StringVar(&f.id, "id", "", "")
	var ignored string
	for _, name := range []string{"socket", "debug-socket", "bundle", "publish-binary"} {
		fs.StringVar(&ignored, name, "", "")
	}
	fs.StringVar(&f.address, "address", "", "")
	if err := fs.Parse(args); err != nil || b {
		return f, false
	}
	return f, fs.Arg(0) == "start"
}
