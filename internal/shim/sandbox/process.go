package sandbox

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"

	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/openhcs/runhcs/protocols/stats"
)

// KindProcess is the bundle-state kind of a process-isolated sandbox.
const KindProcess = "process"

// guid is an HNS namespace id as containerd's Windows CRI passes it in netns_path
// (pkg/netns/netns_windows.go NewNetNS: hcn.HostComputeNamespace.Create().Id, a GUID).
var guid = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// ProcessPod is the pod of a process-isolated sandbox. It runs no container of its own:
// hcsshim runs a pause container to hold the pod's network compartment
// (cmd/containerd-shim-runhcs-v1/pod.go, the comment on the compartment-activation bug), but
// with the sandbox API there is no pause image; the pod's containers carry its HNS namespace
// in spec.windows.network.networkNamespace (containerd's CRI puts the sandbox's netns there)
// and share it through HNS, which keeps a namespace until it is deleted. Its pid is the
// shim's, the process that answers for the pod.
type ProcessPod struct {
	netns string

	once sync.Once
	exit chan struct{}
}

var _ Pod = (*ProcessPod)(nil)

// CheckNetNS checks a pod's namespace id (netns_path): an HNS namespace id, or "" for the
// host's network.
func CheckNetNS(netns string) error {
	if netns != "" && !guid.MatchString(netns) {
		return fmt.Errorf("netns_path %q: want an HNS namespace id (a GUID) or nothing: %w", netns, errdefs.ErrInvalidArgument)
	}
	return nil
}

// NewProcessPod checks the pod's namespace id ("" for the host's network) and returns its pod.
func NewProcessPod(netns string) (*ProcessPod, error) {
	if err := CheckNetNS(netns); err != nil {
		return nil, err
	}
	return &ProcessPod{netns: netns, exit: make(chan struct{})}, nil
}

func (p *ProcessPod) Start(context.Context) (uint32, error) { return uint32(os.Getpid()), nil }

func (p *ProcessPod) Stop(context.Context) error {
	p.once.Do(func() { close(p.exit) })
	return nil
}

func (p *ProcessPod) Exited() <-chan struct{} { return p.exit }
func (p *ProcessPod) ExitStatus() uint32      { return 0 }

func (p *ProcessPod) Release(context.Context) error { return p.Stop(context.Background()) }

// Statistics of a process-isolated pod are zero: the pod runs nothing of its own, and
// containerd's Windows CRI adds its containers' to these (sandbox_stats_windows.go
// toPodSandboxStats, appendCPUPodStats and appendMemoryPodStats).
func (p *ProcessPod) Statistics(context.Context) (*stats.Statistics, error) {
	return &stats.Statistics{Container: &stats.Statistics_Windows{Windows: &stats.WindowsContainerStatistics{
		Timestamp: timestamppb.Now(),
		Processor: &stats.WindowsContainerProcessorStatistics{},
		Memory:    &stats.WindowsContainerMemoryStatistics{},
	}}}, nil
}
