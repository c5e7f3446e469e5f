package oci

import (
	"fmt"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Limits of HCS's processor settings: Maximum and Weight are in 1/10000ths (the runtime
// spec's WindowsCPUResources documents both as cycles per 10,000).
const (
	maxProcessorMaximum = 10000
	maxProcessorWeight  = 10000
)

// Resources are the container limits HCS takes in Container.Processor, Container.Memory and
// Container.Storage.QoS. Nil members mean "not set".
type Resources struct {
	Processor *schema2.Processor
	Memory    *schema2.Memory
	QoS       *schema2.StorageQoS
}

// WindowsResources validates r and translates it, with the io.microsoft.container.*
// resource annotations overriding it (annotations may be nil).
func WindowsResources(r *specs.WindowsResources, annotations map[string]string) (*Resources, error) {
	var (
		count, maximum, weight uint64
		out                    Resources
	)
	if r != nil && r.CPU != nil {
		if r.CPU.Count != nil {
			if *r.CPU.Count == 0 {
				return nil, invalid("windows.resources.cpu.count", *r.CPU.Count, "must be at least 1")
			}
			count = *r.CPU.Count
		}
		if r.CPU.Maximum != nil {
			maximum = uint64(*r.CPU.Maximum)
			if maximum == 0 || maximum > maxProcessorMaximum {
				return nil, invalid("windows.resources.cpu.maximum", maximum, fmt.Sprintf("must be between 1 and %d", maxProcessorMaximum))
			}
		}
		if r.CPU.Shares != nil {
			weight = uint64(*r.CPU.Shares)
			if weight > maxProcessorWeight {
				return nil, invalid("windows.resources.cpu.shares", weight, fmt.Sprintf("must be between 0 and %d", maxProcessorWeight))
			}
		}
		if len(r.CPU.Affinity) > 0 {
			return nil, fmt.Errorf("windows.resources.cpu.affinity: processor affinity is not supported for process-isolated containers: %w", errdefs.ErrNotImplemented)
		}
	}
	if v, ok, err := annotationUint(annotations, AnnotationProcessorCount, 32); err != nil {
		return nil, err
	} else if ok {
		if v == 0 {
			return nil, invalid("annotation "+AnnotationProcessorCount, v, "must be at least 1")
		}
		count = v
	}
	if v, ok, err := annotationUint(annotations, AnnotationProcessorLimit, 64); err != nil {
		return nil, err
	} else if ok {
		if v == 0 || v > maxProcessorMaximum {
			return nil, invalid("annotation "+AnnotationProcessorLimit, v, fmt.Sprintf("must be between 1 and %d", maxProcessorMaximum))
		}
		maximum = v
	}
	if v, ok, err := annotationUint(annotations, AnnotationProcessorWeight, 64); err != nil {
		return nil, err
	} else if ok {
		if v > maxProcessorWeight {
			return nil, invalid("annotation "+AnnotationProcessorWeight, v, fmt.Sprintf("must be between 0 and %d", maxProcessorWeight))
		}
		weight = v
	}
	// HCS rejects a silo with a processor count together with a maximum or a weight; hcsshim
	// refuses the combination up front for process-isolated containers (hcsoci's WCOW
	// document builder), and so do we, naming the fields.
	if count > 0 && (maximum > 0 || weight > 0) {
		return nil, fmt.Errorf("windows.resources.cpu: count (%d) cannot be combined with maximum (%d) or shares (%d) for a process-isolated container: %w",
			count, maximum, weight, errdefs.ErrInvalidArgument)
	}
	if count > 0 || maximum > 0 || weight > 0 {
		if count > uint64(^uint32(0)) {
			return nil, invalid("windows.resources.cpu.count", count, "is too large")
		}
		out.Processor = &schema2.Processor{Count: uint32(count), Maximum: maximum, Weight: weight}
	}

	var sizeInMB uint64
	if r != nil && r.Memory != nil && r.Memory.Limit != nil {
		// HCS takes megabytes; hcsshim rounds a byte limit down the same way.
		sizeInMB = *r.Memory.Limit / (1024 * 1024)
		if sizeInMB == 0 {
			return nil, invalid("windows.resources.memory.limit", *r.Memory.Limit, "must be at least 1 MiB (1048576 bytes)")
		}
	}
	if v, ok, err := annotationUint(annotations, AnnotationMemorySizeInMB, 64); err != nil {
		return nil, err
	} else if ok {
		if v == 0 {
			return nil, invalid("annotation "+AnnotationMemorySizeInMB, v, "must be at least 1")
		}
		sizeInMB = v
	}
	if sizeInMB > 0 {
		out.Memory = &schema2.Memory{SizeInMB: sizeInMB}
	}

	var iops, bps uint64
	if r != nil && r.Storage != nil {
		if r.Storage.Iops != nil {
			iops = *r.Storage.Iops
		}
		if r.Storage.Bps != nil {
			bps = *r.Storage.Bps
		}
	}
	if v, ok, err := annotationUint(annotations, AnnotationStorageQoSIops, 64); err != nil {
		return nil, err
	} else if ok {
		iops = v
	}
	if v, ok, err := annotationUint(annotations, AnnotationStorageQoSBps, 64); err != nil {
		return nil, err
	} else if ok {
		bps = v
	}
	if iops > 0 || bps > 0 {
		out.QoS = &schema2.StorageQoS{IopsMaximum: iops, BandwidthMaximum: bps}
	}
	return &out, nil
}

// UpdateRequests translates a task update (spec.WindowsResources, as containerd's CRI sends
// it) into the HCS modify requests that apply it to a running process-isolated container,
// processor first, then memory, with the resource paths hcsshim uses for silos.
func UpdateRequests(r *specs.WindowsResources) ([]*schema2.ModifySettingRequest, error) {
	if r == nil {
		return nil, fmt.Errorf("update: no windows resources given: %w", errdefs.ErrInvalidArgument)
	}
	if r.Storage != nil {
		return nil, fmt.Errorf("update: windows.resources.storage cannot be changed on a running container: %w", errdefs.ErrNotImplemented)
	}
	res, err := WindowsResources(r, nil)
	if err != nil {
		return nil, err
	}
	var reqs []*schema2.ModifySettingRequest
	if res.Processor != nil {
		reqs = append(reqs, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathContainerProcessor,
			RequestType:  schema2.RequestTypeUpdate,
			Settings:     res.Processor,
		})
	}
	if res.Memory != nil {
		reqs = append(reqs, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathContainerMemory,
			RequestType:  schema2.RequestTypeUpdate,
			Settings:     res.Memory.SizeInMB,
		})
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("update: windows.resources sets neither cpu nor memory: %w", errdefs.ErrInvalidArgument)
	}
	return reqs, nil
}

func invalid(field string, value any, why string) error {
	return fmt.Errorf("%s=%v: %s: %w", field, value, why, errdefs.ErrInvalidArgument)
}
