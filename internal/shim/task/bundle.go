package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs"

	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/oci"
	"github.com/openhcs/runhcs/internal/uvm"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// StateFile is what a task leaves in its bundle so that the `delete` action, run by
// containerd after the shim died, can find what to clean up.
const StateFile = "runhcs-state.json"

// bundleState is the content of StateFile.
type bundleState struct {
	// SystemID is the id of the task's compute system.
	SystemID string `json:"systemId"`
	// Layers is the mounted chain, nil if none was mounted.
	Layers *layers.Chain `json:"layers,omitempty"`
	// InitPid is the init process's pid once it started, so that the delete action reports the
	// exit of that pid (as runc's shim does) rather than of pid 0.
	InitPid uint32 `json:"initPid,omitempty"`
	// VMID is the utility VM a standalone Hyper-V task owns (hosted.go), ended with it.
	VMID string `json:"vmId,omitempty"`
	// Namespace is the HNS namespace the shim made for the task's endpoint list, and
	// Endpoints those endpoints (network.go); empty when CRI made the namespace.
	Namespace string   `json:"namespace,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
	// CCG is the Container Credential Guard instance made for the task's credential spec
	// (ccg.go), recorded before it is made.
	CCG string `json:"ccg,omitempty"`
	// Job is a HostProcess container's job, bindings and temporary account (jobcontainer.go),
	// each recorded before it exists.
	Job *jobRecord `json:"job,omitempty"`
	// HostProcessSandbox: the task is a HostProcess pod's sandbox (hostprocesssandbox.go),
	// which holds nothing; there is no compute system to end.
	HostProcessSandbox bool `json:"hostProcessSandbox,omitempty"`
}

// recordInitPid adds the started init process's pid to the bundle's state.
func recordInitPid(bundle string, pid uint32) error {
	st, err := readBundleState(bundle)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("record init pid %d: bundle %q has no task state", pid, bundle)
	}
	st.InitPid = pid
	return writeState(bundle, st)
}

func writeState(bundle string, st *bundleState) error {
	if err := atomicfile.WriteJSON(filepath.Join(bundle, StateFile), st, 0o600); err != nil {
		return fmt.Errorf("task state: %w", err)
	}
	return nil
}

// readBundleState returns (nil, nil) when the bundle has no state.
func readBundleState(bundle string) (*bundleState, error) {
	var st bundleState
	if found, err := atomicfile.ReadJSON(filepath.Join(bundle, StateFile), &st); !found || err != nil {
		if err != nil {
			return nil, fmt.Errorf("task state: %w", err)
		}
		return nil, nil
	}
	return &st, nil
}

func removeBundleState(bundle string) error {
	if err := os.Remove(filepath.Join(bundle, StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove task state in bundle %q: %w", bundle, err)
	}
	return nil
}

// ReadSpec reads the bundle's config.json and checks it is a Windows spec.
func ReadSpec(bundle string) (*specs.Spec, error) {
	p := filepath.Join(bundle, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read OCI spec: %w", err)
	}
	if err := oci.CheckUTF16(b); err != nil {
		return nil, fmt.Errorf("OCI spec: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("OCI spec %q: %v: %w", p, err, errdefs.ErrInvalidArgument)
	}
	if s.Windows == nil {
		return nil, oci.ErrNoWindowsSection
	}
	return &s, nil
}

// resources is what a task holds, each part optional: its compute system (sys, or when sys is
// nil and systemID is set, the system opened by id), its mounted layer chain and its state in
// the bundle.
type resources struct {
	sys      System
	systemID string
	chain    *layers.Chain
	bundle   string
	// namespace is the HNS namespace made for endpoints (network.go), removed with them.
	namespace string
	endpoints []string
	// vmRelease gives back what a container hosted in a utility VM borrowed from it (its
	// storage, shares, pipes), in order of acquisition; release runs them in reverse.
	vmRelease []func(context.Context) error
	// ccg is the Container Credential Guard instance of the task (ccg.go).
	ccg string
	// vm is the utility VM the task owns (a VM sandbox's, a standalone task's): stopped once
	// what was borrowed from it was given back, and closed with the task.
	vm *uvm.VM
	// job is a HostProcess container's job, bindings and temporary account (jobcontainer.go).
	job *jobResources
}

// release is the one path that ends what a task holds, in reverse order of acquisition: the
// compute system is terminated (one already gone is fine), what it borrowed from a utility VM
// given back, the VM it owns stopped, the layers unmounted, the HNS namespace made for the
// task's endpoints removed, the Container Credential Guard instance removed, and, only when all
// that worked, the handles closed and the bundle's state removed, so that a failure leaves the
// state for a retry (the next Delete, or the delete action after a crash). It is idempotent.
func release(ctx context.Context, deps Deps, r resources) error {
	var errs []error
	switch {
	case r.job != nil && r.sys != nil:
		// A HostProcess container's job: its handle first; r.job ends it by name below
		// whatever this says.
		_ = r.sys.Terminate(ctx)
	case r.job != nil:
	case r.sys != nil || r.systemID != "":
		if err := terminateSystem(ctx, deps.Host, r.sys, r.systemID); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(r.vmRelease) - 1; i >= 0; i-- {
		if err := r.vmRelease[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if r.vm != nil {
		// The VM's Terminate removes its network first. When its handle fails otherwise, HCS
		// is asked afresh by id, as for a container (terminateSystem).
		if err := r.vm.Terminate(ctx); err != nil {
			if ferr := terminateSystem(ctx, deps.Host, nil, r.vm.ID()); ferr != nil {
				errs = append(errs, err)
			}
		}
	}
	if r.job != nil {
		// The bindings name the mounted layers: removed before the layers are unmounted.
		errs = append(errs, r.job.release(ctx)...)
	}
	if r.chain != nil {
		if err := deps.Mounter.Unmount(ctx, r.chain.Scratch); err != nil {
			errs = append(errs, err)
		}
	}
	if r.namespace != "" {
		if err := deleteNamespace(ctx, deps.HNS, r.namespace, r.endpoints); err != nil {
			errs = append(errs, err)
		}
	}
	if r.ccg != "" {
		if err := removeCCG(ctx, deps, r.ccg); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if r.sys != nil {
		_ = r.sys.Close()
	}
	if r.vm != nil {
		_ = r.vm.Close()
	}
	if r.bundle != "" {
		return removeBundleState(r.bundle)
	}
	return nil
}

// terminateSystem terminates sys, or the system id when sys is nil; a system that is already
// gone is not an error. When the handle fails otherwise (it may be stale: the HCS service
// restarted, and with it every compute system), the service is asked afresh by id.
func terminateSystem(ctx context.Context, host Host, sys System, id string) error {
	var herr error // the handle's failure, named if reopening fails too
	if sys != nil {
		herr = sys.Terminate(ctx)
		if herr == nil || hcs.IsGone(herr) {
			return nil
		}
		log.G(ctx).WithError(herr).WithField("system", id).Debug("terminate through the task's handle failed; reopening")
	}
	fresh, err := host.OpenComputeSystem(ctx, id)
	if err != nil {
		if hcs.IsGone(err) {
			return nil
		}
		if herr != nil {
			return fmt.Errorf("terminate compute system %q: %w (and reopening it: %v)", id, herr, err)
		}
		return fmt.Errorf("open compute system %q: %w", id, err)
	}
	defer fresh.Close()
	if err := fresh.Terminate(ctx); err != nil && !hcs.IsGone(err) {
		return fmt.Errorf("terminate compute system %q: %w", id, err)
	}
	return nil
}

// Cleanup is the shim's delete action: it removes what task id of bundle left behind after
// its shim died, and returns the pid of its init process if it had started (0 otherwise).
func Cleanup(ctx context.Context, deps Deps, id, bundle string) (initPid uint32, _ error) {
	st, err := readBundleState(bundle)
	if err != nil {
		return 0, err
	}
	r := resources{systemID: id, bundle: bundle}
	if st != nil {
		if st.SystemID != "" {
			r.systemID = st.SystemID
		}
		r.chain = st.Layers
		r.namespace, r.endpoints = st.Namespace, st.Endpoints
		r.ccg = st.CCG
		if st.VMID != "" {
			vmID := st.VMID
			r.vmRelease = []func(context.Context) error{func(ctx context.Context) error {
				return terminateSystem(ctx, deps.Host, nil, vmID)
			}}
		}
		if st.Job != nil {
			if deps.HostProcess == nil {
				return 0, fmt.Errorf("delete task %s: it is a HostProcess container, and this shim has no HostProcess support: %w", id, errdefs.ErrNotImplemented)
			}
			host, err := deps.HostProcess()
			if err != nil {
				return 0, fmt.Errorf("delete task %s: %w", id, err)
			}
			// No compute system: the job is ended by name.
			r.systemID, r.job = "", &jobResources{host: host, rec: *st.Job}
		}
		if st.HostProcessSandbox {
			r.systemID = ""
		}
		initPid = st.InitPid
	} else if spec, err := ReadSpec(bundle); err == nil && spec.Windows != nil {
		// No state: a shim from before the state existed, or one that died before writing it.
		// The spec's layer folders still name the scratch.
		r.chain, _ = layers.FromLayerFolders(spec.Windows.LayerFolders)
	}
	cctx, cancel := context.WithTimeout(ctx, deps.callTimeout())
	defer cancel()
	return initPid, release(cctx, deps, r)
}
