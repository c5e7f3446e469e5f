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
	"strings"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

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
// the JSON bootstrap document with protocol ttrpc and the version of bootstrapVersion, 2 or 3.
// containerd 1.7 accepts versions up to 2 (runtime/v2/shim.go parseStartResponse); containerd
// 2.x first tries the output as a protobuf BootstrapResult (which JSON never parses as), then
// reads the same JSON, accepts up to 3 (core/runtime/v2/shim.go CurrentShimVersion) and calls
// containerd.task.v2.Task for version 2, v3 for version 3 (bridge.go NewTaskClient).
// askVersion asks containerd at the -address it was given for its version (containerdVersion).
// Nothing may go to stderr on success: containerd reads the combined output.
func start(ctx context.Context, f startFlags, stdin io.Reader, stdout io.Writer, startShim startFunc, askVersion versionFunc) error {
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
	}{bootstrapVersion(os.Getenv("MAX_SHIM_VERSION"), askVersion(ctx, f.address)), addr, "ttrpc"})
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}

// bootstrapVersion is the version the start document advertises: 3 under containerd 2.x, 2
// under 1.7. Both set MAX_SHIM_VERSION=2 in the start action's environment whatever they accept
// (1.7.35 runtime/v2/shim/util.go Command; 2.4.2 core/runtime/v2/command.go command), and both
// invoke it alike (-namespace, -address, -publish-binary, -id, [-debug], start; the options on
// stdin), so what tells them apart is the version containerd itself reports (containerdVersion):
// major 2 or more answers 3, anything else — 1.x, or no answer — 2, which both accept. A
// MAX_SHIM_VERSION of 3 or more (no containerd sets one today) answers 3 as well.
//
// Version 3 is what makes containerd 2.x reuse a pod's shim for the pod's other containers
// without running this binary again (core/runtime/v2/shim_manager.go ShimManager.Start: the
// sandbox's bootstrap params with Version >= supportSandboxAPIVersion, 3, are written into the
// new task's bundle as bootstrap.json, with the pod's id in its "sandbox" file). What else it
// means there, and how the shim meets it (docs/architecture.md, "Wire compatibility"):
//   - task API v3, which the shim serves (plugin.go) next to v2;
//   - "streaming I/O": used only when the CRI runtime sets io_type = "streaming"
//     (internal/cri/server/container_create.go), which the shim refuses by the stdio URI's
//     scheme (internal/shim/stdio Open: not implemented, naming the stream and its URI);
//   - `delete`: containerd 2.4.2 still runs the delete action in such a task's bundle when its
//     connection to the pod's shim closes (shim_manager.go:297, loadShim with an onClose that
//     calls cleanupAfterDeadShim; observed on the emulated node: one delete run per container,
//     as under version 2), so each task's own delete cleans it up as before. (containerd at
//     v2.4.0-beta.0-70-g301026e58 passes an empty onClose there instead; a containerd like
//     that would run no delete for such a task, which this shim does not make up for.)
//   - after a containerd restart, such a task is reconnected from its bootstrap.json
//     (core/runtime/v2/shim_load.go), or, if the pod's shim is gone, cleaned up by a delete
//     run in its own bundle as before.
func bootstrapVersion(maxVersion, containerdVersion string) int {
	if v, err := strconv.Atoi(maxVersion); err == nil && v >= 3 {
		return 3
	}
	if major(containerdVersion) >= 2 {
		return 3
	}
	return 2
}

// major is the major number of a containerd version as its version service reports it
// ("v2.4.2", "2.4.2+unknown", "1.7.35"), or 0 when it has none.
func major(version string) int {
	s := strings.TrimPrefix(version, "v")
	if i := strings.IndexAny(s, ".+-"); i >= 0 {
		s = s[:i]
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// versionFunc asks containerd at its gRPC address for its version: containerdVersion, or a
// stand-in in tests. It returns "" when containerd does not answer.
type versionFunc func(ctx context.Context, address string) string

// versionTimeout bounds the version question; containerd, which is waiting for this start
// action, answers it at once, and an unanswered question only costs version 2.
const versionTimeout = 10 * time.Second

// containerdVersion asks containerd.services.version.v1.Version/Version at address (the -address
// containerd passes, its gRPC endpoint: a unix socket, or a named pipe on Windows; dialed by
// dialContainerd). Both 1.7 and 2.x serve it (services/version, plugins/services/version) with
// their version.Version. Any failure is "": the caller then answers version 2.
func containerdVersion(ctx context.Context, address string) string {
	if address == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	conn, err := containerdConn(address)
	if err != nil {
		return ""
	}
	defer conn.Close()
	r, err := versionapi.NewVersionClient(conn).Version(ctx, &emptypb.Empty{})
	if err != nil {
		return ""
	}
	return r.GetVersion()
}

// containerdConn is a gRPC client of containerd at address (its -address: a unix socket, or a
// named pipe on Windows), for the version question and a Hyper-V sandbox's boot image
// (bootimage.go). It connects at the first call.
func containerdConn(address string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialContainerd))
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
