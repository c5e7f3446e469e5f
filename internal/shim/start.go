package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/internal/oci"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// startFunc starts or joins the pod's shim and returns its address: startOrJoin, or a stand-in
// in tests. ttrpcAddress is containerd's $TTRPC_ADDRESS.
type startFunc func(ctx context.Context, f startFlags, ttrpcAddress string) (string, error)

// maxOptionsSize bounds what the start action reads from stdin.
const maxOptionsSize = 10 << 20

// start is the `start` action. containerd runs it with the task's bundle as working directory
// and, on stdin, the runtime options as a marshalled Any (or nothing). Both containerd 1.7 and
// 2.x use this legacy protocol for a binary named *shim-runhcs-v1: containerd 2.x's
// core/runtime/v2/command.go special-cases that name and does not send bootstrap parameters,
// which is why the shim package's own start (which requires them) is not used.
//
// It prints the address of the shim that will serve the task: a new shim's, or — when the
// task belongs to a pod whose shim is running — that shim's (one shim per pod). The output is
// the JSON bootstrap document with protocol ttrpc and the version of bootstrapVersion:
// containerd 1.7 accepts versions up to 2 (runtime/v2/shim.go parseStartResponse); containerd
// 2.x first tries the output as a protobuf BootstrapResult (which JSON never parses as), then
// reads the same JSON, and calls containerd.task.v2.Task for version 2, v3 for version 3.
// Nothing may go to stderr on success: containerd reads the combined output.
func start(ctx context.Context, f startFlags, stdin io.Reader, stdout io.Writer, startShim startFunc) error {
	if f.namespace == "" {
		return fmt.Errorf("-namespace is required: %w", errdefs.ErrInvalidArgument)
	}
	if f.id == "" {
		return fmt.Errorf("-id is required: %w", errdefs.ErrInvalidArgument)
	}
	ctx = namespaces.WithNamespace(ctx, f.namespace)
	b, err := io.ReadAll(io.LimitReader(stdin, maxOptionsSize))
	if err != nil {
		return fmt.Errorf("read runtime options: %w", err)
	}
	if len(b) > 0 {
		var a anypb.Any
		if err := proto.Unmarshal(b, &a); err != nil {
			return fmt.Errorf("runtime options on stdin: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		o, err := decodeOptions(&a)
		if err != nil {
			return err
		}
		if l := logLevel(o); l == "debug" || l == "trace" {
			f.debug = true
		}
		f.options = string(b)
	}
	addr, err := startShim(ctx, f, os.Getenv("TTRPC_ADDRESS"))
	if err != nil {
		return err
	}
	out, err := json.Marshal(struct {
		Version  int    `json:"version"`
		Address  string `json:"address"`
		Protocol string `json:"protocol"`
	}{bootstrapVersion(os.Getenv("MAX_SHIM_VERSION")), addr, "ttrpc"})
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// bootstrapVersion is the version the start document advertises: 3 (task v3) when containerd
// says it accepts it in MAX_SHIM_VERSION, else 2 (task v2). Both containerd 1.7 and 2.4 set
// MAX_SHIM_VERSION=2 for this protocol, so both call containerd.task.v2.Task today; the v3
// service is served as well for a containerd that asks for it.
func bootstrapVersion(maxVersion string) int {
	if v, err := strconv.Atoi(maxVersion); err == nil && v >= 3 {
		return 3
	}
	return 2
}

// shimGroup is the pod a task belongs to: the sandbox id CRI puts on every container of a pod
// (the sandbox's own spec carries its own id), or the task id itself.
func shimGroup(bundle, id string) string {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return id
	}
	var s struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(b, &s) != nil {
		return id
	}
	if g := s.Annotations[oci.AnnotationSandboxID]; g != "" {
		return g
	}
	return id
}

// launcher finds or starts a pod's shim.
type launcher struct {
	// socketRoot is where shim sockets live (Unix only): containerd's default socket
	// directory, where 1.7's runc shim puts them too.
	socketRoot string
	// start starts a new shim process (startShimProcess; a counting stand-in in tests).
	start func(cmd *exec.Cmd) error
	// joinWait bounds the wait for a pod's socket to accept or refuse a connection (Unix
	// only; 0 means defaultJoinWait).
	joinWait time.Duration
}

// startOrJoin returns the address of the shim serving the pod of the task whose bundle is the
// working directory (containerd runs the start action there): that of the pod's running shim,
// or of one it starts (launchOrJoin, per OS). Either way it records the address in the
// bundle's address file: containerd reads it to find the task's shim again after a restart
// (1.7: runtime/v2/shim.go loadShim; 2.x: core/runtime/v2/shim_manager.go
// restoreBootstrapParams, when there is no bootstrap.json), and a shim reads its own to remove
// its socket when it exits (run.go).
func (l launcher) startOrJoin(ctx context.Context, f startFlags, _ string) (string, error) {
	bundle, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("start task %s: working directory (the bundle): %w", f.id, err)
	}
	// Before the shim starts: its CreateSandbox reads them.
	if err := recordSandboxOptions(bundle, []byte(f.options)); err != nil {
		return "", err
	}
	address, err := l.launchOrJoin(ctx, f, bundle, shimGroup(bundle, f.id))
	if err != nil {
		return "", err
	}
	// containerd or a shim may read the address file at any time: written atomically.
	if err := atomicfile.WriteFile(filepath.Join(bundle, "address"), []byte(address), 0o600); err != nil {
		return "", fmt.Errorf("record shim address %s in bundle %q: %w", address, bundle, err)
	}
	return address, nil
}
