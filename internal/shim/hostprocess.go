package shim

import (
	"context"
	"fmt"
	"strings"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hostprocess"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/shim/stdio"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// createJob translates the Create request of a HostProcess container (oci.HostProcess) and
// hands it to the pod: everything a HostProcess container cannot have is refused here, naming
// the field, before anything is touched.
func (s *service) createJob(ctx context.Context, req *taskapi.CreateTaskRequest, spec *specs.Spec, chain *layers.Chain, credSpec string) (task.Task, error) {
	fail := func(err error) (task.Task, error) { return nil, fmt.Errorf("task %s: %w", req.ID, err) }
	if credSpec != "" {
		return fail(fmt.Errorf("windows.credentialSpec: a HostProcess container runs as a host account, not with a gMSA credential spec: %w", errdefs.ErrNotImplemented))
	}
	if n := spec.Windows.Network; n != nil && (n.NetworkNamespace != "" || len(n.EndpointList) > 0) {
		return fail(fmt.Errorf("windows.network (namespace %q, endpoints %v): a HostProcess container uses the host's network (containerd's CRI gives it none): %w", n.NetworkNamespace, n.EndpointList, errdefs.ErrInvalidArgument))
	}
	// A container of a HostProcess pod inherits the pod's inherit-user and rootfs-location
	// annotations unless it sets them (as in hcsshim's pod.go); a sandbox passes its own on.
	passed := map[string]string{}
	inherited := s.pod.HostProcessPodAnnotations(spec.Annotations[oci.AnnotationSandboxID])
	for _, k := range []string{oci.AnnotationHostProcessInheritUser, oci.AnnotationHostProcessRootfsLocation} {
		if _, set := spec.Annotations[k]; !set {
			if v, ok := inherited[k]; ok && req.ID != spec.Annotations[oci.AnnotationSandboxID] {
				spec.Annotations[k] = v
			}
		}
		if v, ok := spec.Annotations[k]; ok {
			passed[k] = v
		}
	}
	location, err := hostprocess.RootfsLocation(req.ID, spec.Annotations[oci.AnnotationHostProcessRootfsLocation])
	if err != nil {
		return fail(err)
	}
	if spec.Annotations[oci.AnnotationContainerType] == "sandbox" {
		// A HostProcess pod's sandbox runs nothing (task.HostProcessSandbox): the pause image's
		// program and user are no one's on the host. Its annotations, checked above, pass on.
		return s.pod.CreateHostProcessSandbox(ctx, task.HostProcessSandboxConfig{
			ID:             req.ID,
			Bundle:         req.Bundle,
			IO:             stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal},
			PodAnnotations: passed,
		})
	}
	inherit := oci.HostProcessInheritUser(spec)
	if !inherit && spec.Process.User.Username == "" {
		return fail(fmt.Errorf("process.user.username: empty; a HostProcess container runs as NT AUTHORITY\\SYSTEM, NT AUTHORITY\\LOCAL SERVICE, NT AUTHORITY\\NETWORK SERVICE, a local group or another account (Kubernetes: runAsUserName): %w", errdefs.ErrInvalidArgument))
	}
	if _, err := oci.ProcessParameters(spec.Process, oci.Stdio{}); err != nil {
		return fail(err)
	}
	res, err := oci.WindowsResources(spec.Windows.Resources, spec.Annotations)
	if err != nil {
		return fail(err)
	}
	if res.QoS != nil {
		return fail(fmt.Errorf("windows.resources.storage (iops %d, bps %d): storage limits are not applied to a HostProcess container's job: %w", res.QoS.IopsMaximum, res.QoS.BandwidthMaximum, errdefs.ErrNotImplemented))
	}
	var limits hostprocess.Limits
	if p := res.Processor; p != nil {
		limits.CPUCount, limits.CPUMaximum, limits.CPUWeight = p.Count, uint32(p.Maximum), uint32(p.Weight)
	}
	if m := res.Memory; m != nil {
		limits.MemoryBytes = m.SizeInMB * 1024 * 1024
	}
	for i, m := range spec.Mounts {
		if m.Source == "" || m.Destination == "" {
			return fail(fmt.Errorf("mounts[%d]: source %q, destination %q: both are needed: %w", i, m.Source, m.Destination, errdefs.ErrInvalidArgument))
		}
		if strings.HasPrefix(m.Source, `\\.\pipe\`) {
			return fail(fmt.Errorf("mounts[%d].source %q: a named pipe cannot be mounted into a HostProcess container; it reaches the host's pipes directly: %w", i, m.Source, errdefs.ErrInvalidArgument))
		}
		if _, err := hostprocess.MountPath(location, m.Destination); err != nil {
			return fail(fmt.Errorf("mounts[%d].destination: %w", i, err))
		}
	}
	return s.pod.CreateJobContainer(ctx, spec.Annotations[oci.AnnotationSandboxID], task.JobConfig{
		ID:          req.ID,
		Bundle:      req.Bundle,
		Chain:       chain,
		Process:     spec.Process,
		IO:          stdio.Config{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Terminal: req.Terminal},
		Mounts:      spec.Mounts,
		Limits:      limits,
		Location:    location,
		InheritUser: inherit,
	})
}
