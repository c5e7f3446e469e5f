package oci

import (
	"fmt"
	"strconv"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

// Utility VM annotations, spelled as hcsshim publishes them (pkg/annotations in
// Microsoft/hcsshim). On a Hyper-V pod's sandbox (or a standalone Hyper-V task) they size its
// utility VM and win over the runtime options and spec.windows.resources.
const (
	AnnotationVMProcessorCount        = "io.microsoft.virtualmachine.computetopology.processor.count"
	AnnotationVMProcessorLimit        = "io.microsoft.virtualmachine.computetopology.processor.limit"
	AnnotationVMProcessorWeight       = "io.microsoft.virtualmachine.computetopology.processor.weight"
	AnnotationVMMemorySizeInMB        = "io.microsoft.virtualmachine.computetopology.memory.sizeinmb"
	AnnotationVMAllowOvercommit       = "io.microsoft.virtualmachine.computetopology.memory.allowovercommit"
	AnnotationVMEnableDeferredCommit  = "io.microsoft.virtualmachine.computetopology.memory.enabledeferredcommit"
	AnnotationVMFullyPhysicallyBacked = "io.microsoft.virtualmachine.fullyphysicallybacked"
)

// Utility VM defaults, hcsshim's (internal/uvm/create.go newDefaultOptions; runhcs.proto's
// comments on vm_memory_size_in_mb and vm_processor_count).
const (
	DefaultVMMemoryMB       = 1024
	DefaultVMProcessorCount = 2
	// maxVMProcessorLimit and maxVMProcessorWeight are the ranges hcsshim documents for the
	// processor annotations (1–100000, where 100000 is 100 %; 0–10000).
	maxVMProcessorLimit  = 100000
	maxVMProcessorWeight = 10000
)

// VMSize is a utility VM's memory and processors, as its HCS document's ComputeTopology takes
// them. internal/uvm builds the document from it.
type VMSize struct {
	MemoryMB             uint64
	AllowOvercommit      bool
	EnableDeferredCommit bool
	ProcessorCount       uint32
	// ProcessorLimit and ProcessorWeight are 0 for the platform's default.
	ProcessorLimit  uint64
	ProcessorWeight uint64
}

// VMSizing reads a utility VM's size from the spec of the task it is made for (a pod's sandbox,
// or a standalone Hyper-V task), the runtime options and the host: each size from the
// annotation, else the runtime option, else spec.windows.resources, else hcsshim's default (the
// options reach hcsshim as annotations filled in where absent, internal/oci/uvm.go
// UpdateSpecFromOptions, so they rank as annotations). Memory is rounded up to an even MB and
// the processor count clamped to hostProcessors (hcsshim's vmutils.NormalizeMemorySize and
// NormalizeProcessorCount). Bad values are refused naming the field and the value; hcsshim
// ignores them with a warning, this shim does not.
func VMSizing(s *specs.Spec, opts *options.Options, hostProcessors uint32) (VMSize, error) {
	o := VMSize{AllowOvercommit: true}
	a := s.Annotations
	var res *specs.WindowsResources
	if s.Windows != nil {
		res = s.Windows.Resources
	}

	mem, err := pickVM(a, AnnotationVMMemorySizeInMB, "runtime options: vm_memory_size_in_mb", int64(opts.GetVmMemorySizeInMb()), func() uint64 {
		if res != nil && res.Memory != nil && res.Memory.Limit != nil && *res.Memory.Limit > 0 {
			return *res.Memory.Limit / (1 << 20)
		}
		return DefaultVMMemoryMB
	})
	if err != nil {
		return VMSize{}, err
	}
	if mem == 0 {
		return VMSize{}, fmt.Errorf("utility VM memory: 0 MB (from %s or spec windows.resources.memory.limit): %w", AnnotationVMMemorySizeInMB, errdefs.ErrInvalidArgument)
	}
	o.MemoryMB = (mem + 1) &^ 1

	count, err := pickVM(a, AnnotationVMProcessorCount, "runtime options: vm_processor_count", int64(opts.GetVmProcessorCount()), func() uint64 {
		if res != nil && res.CPU != nil && res.CPU.Count != nil && *res.CPU.Count > 0 {
			return *res.CPU.Count
		}
		return DefaultVMProcessorCount
	})
	if err != nil {
		return VMSize{}, err
	}
	if count == 0 || count > 1<<16 {
		return VMSize{}, fmt.Errorf("annotation %s=%d: want 1 to 65536 processors: %w", AnnotationVMProcessorCount, count, errdefs.ErrInvalidArgument)
	}
	if hostProcessors == 0 {
		return VMSize{}, fmt.Errorf("utility VM processors: the host reported 0 logical processors: %w", errdefs.ErrFailedPrecondition)
	}
	o.ProcessorCount = min(uint32(count), hostProcessors)

	if o.ProcessorLimit, err = boundedVM(a, AnnotationVMProcessorLimit, 1, maxVMProcessorLimit); err != nil {
		return VMSize{}, err
	}
	if o.ProcessorWeight, err = boundedVM(a, AnnotationVMProcessorWeight, 0, maxVMProcessorWeight); err != nil {
		return VMSize{}, err
	}
	if o.AllowOvercommit, err = boolAnnotation(a, AnnotationVMAllowOvercommit, true); err != nil {
		return VMSize{}, err
	}
	physical, err := boolAnnotation(a, AnnotationVMFullyPhysicallyBacked, false)
	if err != nil {
		return VMSize{}, err
	}
	if physical {
		// hcsshim: "For physical backed memory, set [allowovercommit] to false".
		o.AllowOvercommit = false
	}
	if o.EnableDeferredCommit, err = boolAnnotation(a, AnnotationVMEnableDeferredCommit, false); err != nil {
		return VMSize{}, err
	}
	// hcsshim's VerifyOptions: deferred commit needs overcommit.
	if o.EnableDeferredCommit && !o.AllowOvercommit {
		return VMSize{}, fmt.Errorf("annotation %s=true needs %s=true (and not %s): %w", AnnotationVMEnableDeferredCommit, AnnotationVMAllowOvercommit, AnnotationVMFullyPhysicallyBacked, errdefs.ErrInvalidArgument)
	}
	return o, nil
}

// pickVM returns the annotation key, else the runtime option (when positive), else def().
func pickVM(a map[string]string, key, optName string, opt int64, def func() uint64) (uint64, error) {
	if s, ok := a[key]; ok {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("annotation %s=%q: want a non-negative integer: %w", key, s, errdefs.ErrInvalidArgument)
		}
		return v, nil
	}
	if opt < 0 {
		return 0, fmt.Errorf("%s=%d: must not be negative: %w", optName, opt, errdefs.ErrInvalidArgument)
	}
	if opt > 0 {
		return uint64(opt), nil
	}
	return def(), nil
}

// boundedVM returns the annotation key within [lo, hi], or 0 (the platform default) if absent.
func boundedVM(a map[string]string, key string, lo, hi uint64) (uint64, error) {
	s, ok := a[key]
	if !ok {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("annotation %s=%q: want an integer from %d to %d: %w", key, s, lo, hi, errdefs.ErrInvalidArgument)
	}
	return v, nil
}

// boolAnnotation returns the boolean annotation key, def if absent.
func boolAnnotation(a map[string]string, key string, def bool) (bool, error) {
	s, ok := a[key]
	if !ok {
		return def, nil
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("annotation %s=%q: want true or false: %w", key, s, errdefs.ErrInvalidArgument)
	}
	return v, nil
}
