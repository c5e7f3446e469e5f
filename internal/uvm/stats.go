package uvm

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/protocols/stats"
)

// pageSize is the unit of VMMemory.AssignedMemory (hcsshim's stats.go multiplies by 4096).
const pageSize = 4096

// Stats returns the VM's statistics, the "vm" part of the shim's stats: one query of
// Statistics and Memory, as hcsshim's internal/uvm/stats.go makes it. The working set is the
// assigned memory: hcsshim takes it so for a physically backed VM and otherwise reads the
// working set of the host's vmmem process of the VM, which HCS does not report; this shim
// takes the assigned memory in both cases (assumption: it bounds the working set from above).
func (vm *VM) Stats(ctx context.Context) (*stats.VirtualMachineStatistics, error) {
	props, err := vm.sys.Properties(ctx, schema2.PropertyTypeStatistics, schema2.PropertyTypeMemory)
	if err != nil {
		return nil, fmt.Errorf("stats of utility VM %s: %w", vm.id, err)
	}
	if props.Statistics == nil {
		return nil, fmt.Errorf("stats of utility VM %s: HCS returned no statistics: %w", vm.id, errdefs.ErrUnavailable)
	}
	out := &stats.VirtualMachineStatistics{
		Processor: &stats.VirtualMachineProcessorStatistics{},
		Memory:    &stats.VirtualMachineMemoryStatistics{},
	}
	if p := props.Statistics.Processor; p != nil {
		out.Processor.TotalRuntimeNs = p.TotalRuntime100ns * 100
	}
	if m := props.Memory; m != nil {
		out.Memory.VirtualNodeCount = m.VirtualNodeCount
		if v := m.VirtualMachineMemory; v != nil {
			out.Memory.WorkingSetBytes = v.AssignedMemory * pageSize
			out.Memory.VmMemory = &stats.VirtualMachineMemory{
				AvailableMemory:       v.AvailableMemory,
				AvailableMemoryBuffer: v.AvailableMemoryBuffer,
				ReservedMemory:        v.ReservedMemory,
				AssignedMemory:        v.AssignedMemory,
				SlpActive:             v.SlpActive,
				BalancingEnabled:      v.BalancingEnabled,
				DmOperationInProgress: v.DmOperationInProgress,
			}
		}
	}
	return out, nil
}

// Resize sets the VM's memory (MB, rounded up to even as at creation) and processor limits:
// the sandbox task's Update (hcsshim's internal/uvm/update_uvm.go; the memory request has no
// RequestType, as hcsshim sends it, docs/notes/hyperv.md §3).
func (vm *VM) Resize(ctx context.Context, memoryMB uint64, limits *schema2.ProcessorLimits) error {
	if memoryMB > 0 {
		if err := vm.add(ctx, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathVMMemory,
			Settings:     (memoryMB + 1) &^ 1,
		}); err != nil {
			return err
		}
	}
	if limits != nil {
		if err := vm.add(ctx, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourcePathVMProcessorLimits,
			RequestType:  schema2.RequestTypeUpdate,
			Settings:     limits,
		}); err != nil {
			return err
		}
	}
	return nil
}
