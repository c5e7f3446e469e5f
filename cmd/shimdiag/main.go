package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/ttrpc"

	"github.com/openhcs/runhcs/protocols/diag"
)

const usage = `usage: shimdiag COMMAND [flags] [SHIM]

Commands:
  list     the shims of a containerd, found through its task bundles (--namespace, --state-dir)
  stacks   the goroutine stacks of the shim at address SHIM
  tasks    the tasks of the shim at SHIM, with their processes and states (--execs=false: ids only)
  pid      the process id of the shim at SHIM
  exec     run a process in the utility VM of the Hyper-V pod at SHIM: exec [--workdir D] SHIM ARG...
  share    share a host folder into that VM: share [--readonly] SHIM HOSTPATH VMPATH

Every command takes --timeout (default 10s). Run "shimdiag COMMAND -h" for its flags.
`

// errUsage is a command line error: the usage was printed.
var errUsage = errors.New("usage")

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "shimdiag: %v\n", err)
		}
		os.Exit(1)
	}
}

// run runs one shimdiag command line (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("shimdiag "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 10*time.Second, "bound on each call to a shim")
	var (
		namespace, stateDir string
		execs, readOnly     bool
		workdir             string
	)
	switch cmd {
	case "list":
		fs.StringVar(&namespace, "namespace", "", "only the shims of this containerd namespace (default: all)")
		fs.StringVar(&stateDir, "state-dir", defaults.DefaultStateDir, "containerd's state directory (its config's `state`)")
	case "tasks":
		fs.BoolVar(&execs, "execs", true, "list each task's processes and their states")
	case "exec":
		fs.StringVar(&workdir, "workdir", "", "the process's working directory in the VM")
	case "share":
		fs.BoolVar(&readOnly, "readonly", false, "share read-only")
	case "stacks", "pid":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "shimdiag: unknown command %q\n%s", cmd, usage)
		return errUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if cmd == "list" {
		if fs.NArg() != 0 {
			fmt.Fprintf(stderr, "shimdiag list: unexpected arguments %q\n", fs.Args())
			return errUsage
		}
		return list(ctx, stdout, stateDir, namespace, *timeout)
	}
	want := map[string]int{"exec": -2, "share": 3}[cmd] // -n: at least n
	switch n := fs.NArg(); {
	case want == 0 && n != 1, want > 0 && n != want, want < 0 && n < -want:
		fmt.Fprintf(stderr, "shimdiag %s: wrong arguments %q\n%s", cmd, fs.Args(), usage)
		return errUsage
	}
	address := fs.Arg(0)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := connect(ctx, address)
	if err != nil {
		return err
	}
	defer c.Close()
	svc := diag.NewShimDiagClient(c)
	switch cmd {
	case "stacks":
		resp, err := svc.DiagStacks(ctx, &diag.StacksRequest{})
		if err != nil {
			return callError("stacks", address, err)
		}
		fmt.Fprint(stdout, resp.GetStacks())
		if g := resp.GetGuestStacks(); g != "" {
			fmt.Fprintf(stdout, "\n=== guest stacks ===\n%s", g)
		}
	case "tasks":
		resp, err := svc.DiagTasks(ctx, &diag.TasksRequest{Execs: execs})
		if err != nil {
			return callError("tasks", address, err)
		}
		printTasks(stdout, resp, execs)
	case "pid":
		resp, err := svc.DiagPid(ctx, &diag.PidRequest{})
		if err != nil {
			return callError("pid", address, err)
		}
		fmt.Fprintln(stdout, resp.GetPid())
	case "exec":
		return execInVM(ctx, svc, address, fs.Args()[1:], workdir, stdout)
	case "share":
		if _, err := svc.DiagShare(ctx, &diag.ShareRequest{HostPath: fs.Arg(1), UvmPath: fs.Arg(2), ReadOnly: readOnly}); err != nil {
			return callError("share", address, err)
		}
	}
	return nil
}

// connect dials the shim at address (dialShim, per OS) and returns a ttrpc client on it.
func connect(ctx context.Context, address string) (*ttrpc.Client, error) {
	conn, err := dialShim(ctx, address)
	if err != nil {
		return nil, fmt.Errorf("connect to shim %s: %w", address, err)
	}
	return ttrpc.NewClient(conn), nil
}

// callError names the call and the shim, and turns the gRPC status back into its errdefs kind.
// A shim that does not serve the diag service (another runtime's shim) answers "service not
// found": say so plainly.
func callError(op, address string, err error) error {
	err = errgrpc.ToNative(err)
	if strings.Contains(err.Error(), "service containerd.runhcs.v1.diag.ShimDiag") {
		return fmt.Errorf("%s of shim %s: it does not serve containerd.runhcs.v1.diag.ShimDiag (not a runhcs shim?): %w", op, address, err)
	}
	return fmt.Errorf("%s of shim %s: %w", op, address, err)
}

// printTasks prints one line per task, or with execs one line per process: TASK EXEC STATE.
func printTasks(w io.Writer, resp *diag.TasksResponse, execs bool) {
	if !execs {
		for _, t := range resp.GetTasks() {
			fmt.Fprintln(w, t.GetId())
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tEXEC\tSTATE")
	for _, t := range resp.GetTasks() {
		for _, e := range t.GetExecs() {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.GetId(), e.GetId(), e.GetState())
		}
	}
	tw.Flush()
}

// execInVM runs args in the shim's utility VM. The shim writes the process's output (stdout
// and stderr) to a file the client names with a file:// URI, as containerd's log files are
// named; it is printed once the process ended. A non-zero exit code is an error naming it.
func execInVM(ctx context.Context, svc diag.ShimDiagService, address string, args []string, workdir string, stdout io.Writer) error {
	f, err := os.CreateTemp("", "shimdiag-exec-*.log")
	if err != nil {
		return err
	}
	path := f.Name()
	f.Close()
	defer os.Remove(path)
	uri, err := cio.LogURIGenerator("file", path, nil)
	if err != nil {
		return err
	}
	resp, err := svc.DiagExecInHost(ctx, &diag.ExecProcessRequest{Args: args, Workdir: workdir, Stdout: uri.String()})
	if err != nil {
		return callError("exec", address, err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	if code := resp.GetExitCode(); code != 0 {
		return fmt.Errorf("exec %q in the utility VM of shim %s: exit code %d", args, address, code)
	}
	return nil
}
