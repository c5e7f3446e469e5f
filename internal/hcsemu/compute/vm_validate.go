package compute

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// Checks of utility VM and hosted-container documents that need nothing but the document. The
// checks against the host (paths, budget, builds) are in vm_linux.go; see docs/emulator.md for
// the contract. Microsoft marks no field of VirtualMachine as required; the emulator requires what
// a Windows utility VM cannot boot without and what hcsshim always sends (Chipset, ComputeTopology,
// Devices with the "os" share), and refuses what it does not model with E_NOTIMPL naming the field,
// rather than ignoring it.

// Limits of a utility VM.
const (
	// maxSCSIControllers is Hyper-V's limit of SCSI controllers per VM (hcsshim
	// internal/uvm MaxSCSIControllers; Hyper-V documents 4).
	maxSCSIControllers = 4
	// maxVMProcessorLimit is ProcessorLimits.Limit at 100%: "values 1 - 100,000 where 100,000
	// means 100% CPU" (hcsshim pkg/annotations ProcessorLimit).
	maxVMProcessorLimit = 100000
	// maxVMProcessorWeight: "Weight allows values 0 - 10,000" (same source).
	maxVMProcessorWeight = 10000
)

var guidRe = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// attachmentTypes are Attachment.Type values HCS knows (VirtDocs AttachmentType).
var attachmentTypes = []string{"VirtualDisk", "Iso", "PassThru", "ExtensibleVirtualDisk"}

// validateVirtualMachine checks ComputeSystem.VirtualMachine. hostCPUs is the emulated host's
// logical processor count.
func validateVirtualMachine(cs *schema2.ComputeSystem, hostCPUs int) error {
	vm := cs.VirtualMachine
	if cs.SchemaVersion.Minor < 1 {
		// Assumption: GuestConnection, HvSocket and the boot through VmbFs are schema 2.1
		// (VirtDocs "NewInVersion"); a 2.0 document cannot describe a utility VM.
		return hresult.Errorf(computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION, "SchemaVersion: %d.%d: a utility VM needs schema 2.1 or later", cs.SchemaVersion.Major, cs.SchemaVersion.Minor)
	}
	if vm.Chipset == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset: missing required field")
	}
	if vm.Chipset.LinuxKernelDirect != nil {
		return hresult.Errorf(computecore.E_NOTIMPL, "VirtualMachine.Chipset.LinuxKernelDirect: Linux utility VMs are not emulated")
	}
	if vm.Chipset.Uefi == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset.Uefi: missing required field")
	}
	boot := vm.Chipset.Uefi.BootThis
	if boot == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset.Uefi.BootThis: missing required field")
	}
	switch boot.DeviceType {
	case schema2.UVMBootDeviceTypeVmbFs:
	case "ScsiDrive", "Network", "File":
		return hresult.Errorf(computecore.E_NOTIMPL, "VirtualMachine.Chipset.Uefi.BootThis.DeviceType: %q: the emulator boots utility VMs from VmbFs only", boot.DeviceType)
	case "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset.Uefi.BootThis.DeviceType: missing required field")
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "VirtualMachine.Chipset.Uefi.BootThis.DeviceType: %q is not ScsiDrive, VmbFs, Network or File", boot.DeviceType)
	}
	if boot.DevicePath == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset.Uefi.BootThis.DevicePath: missing required field")
	}
	if boot.VmbFsRootPath != "" {
		return hresult.Errorf(computecore.E_NOTIMPL, "VirtualMachine.Chipset.Uefi.BootThis.VmbFsRootPath: the emulator boots from the VSMB share %q (as hcsshim does)", schema2.UVMOSShareName)
	}
	if vm.GuestState != nil {
		return hresult.Errorf(computecore.E_NOTIMPL, "VirtualMachine.GuestState: persistent guest state (confidential VMs) is not emulated")
	}
	if err := validateTopology(vm.ComputeTopology, hostCPUs); err != nil {
		return err
	}
	return validateDevices(vm.Devices)
}

func validateTopology(t *schema2.Topology, hostCPUs int) error {
	const f = "VirtualMachine.ComputeTopology"
	if t == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s: missing required field", f)
	}
	if t.Memory == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Memory: missing required field", f)
	}
	if t.Memory.SizeInMB == 0 {
		// Assumption: HCS cannot start a VM without memory; the error is not documented.
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Memory.SizeInMB: 0: a VM needs memory", f)
	}
	if t.Memory.EnableDeferredCommit && !t.Memory.AllowOvercommit {
		// hcsshim refuses this before sending (internal/uvm/create.go:VerifyOptions).
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Memory.EnableDeferredCommit: needs AllowOvercommit", f)
	}
	if t.Processor == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Processor: missing required field", f)
	}
	p := t.Processor
	if p.Count == 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Processor.Count: 0: a VM needs a processor", f)
	}
	if hostCPUs > 0 && int64(p.Count) > int64(hostCPUs) {
		// hcsshim clamps the count to ProcessorTopology for this reason (vmutils.NormalizeProcessorCount).
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Processor.Count: %d is more than the host's %d logical processors", f, p.Count, hostCPUs)
	}
	return validateProcessorLimits(f+".Processor", p.Limit, p.Weight)
}

func validateProcessorLimits(field string, limit, weight uint64) error {
	if limit > maxVMProcessorLimit {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Limit: %d is out of range (1-%d, 100000 = 100%% of each processor)", field, limit, maxVMProcessorLimit)
	}
	if weight > maxVMProcessorWeight {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Weight: %d is out of range (0-%d)", field, weight, maxVMProcessorWeight)
	}
	return nil
}

func validateDevices(d *schema2.Devices) error {
	const f = "VirtualMachine.Devices"
	if d == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s: missing required field (the VSMB share %q to boot from)", f, schema2.UVMOSShareName)
	}
	for _, id := range slices.Sorted(maps.Keys(d.NetworkAdapters)) {
		// The endpoint is looked up when the VM is created (vm_network_linux.go).
		if d.NetworkAdapters[id].EndpointId == "" {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.NetworkAdapters.%s.EndpointId: missing required field", f, id)
		}
	}
	if d.Plan9 != nil {
		return hresult.Errorf(computecore.E_NOTIMPL, "%s.Plan9: Plan 9 shares (Linux utility VMs) are not emulated", f)
	}
	if len(d.Scsi) > maxSCSIControllers {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Scsi: %d controllers, at most %d", f, len(d.Scsi), maxSCSIControllers)
	}
	for _, ctrl := range slices.Sorted(maps.Keys(d.Scsi)) {
		if ctrl == "" {
			return hresult.Errorf(computecore.E_INVALIDARG, "%s.Scsi: a controller needs a name", f)
		}
		for _, lun := range slices.Sorted(maps.Keys(d.Scsi[ctrl].Attachments)) {
			field := fmt.Sprintf("%s.Scsi.%s.Attachments.%s", f, ctrl, lun)
			if _, err := parseLUN(lun); err != nil {
				return hresult.Errorf(computecore.E_INVALIDARG, "%s: %v", field, err)
			}
			a := d.Scsi[ctrl].Attachments[lun]
			if err := validateAttachment(field, &a); err != nil {
				return err
			}
		}
	}
	if hv := d.HvSocket; hv != nil && hv.HvSocketConfig != nil {
		for _, id := range slices.Sorted(maps.Keys(hv.HvSocketConfig.ServiceTable)) {
			if !guidRe.MatchString(id) {
				return hresult.Errorf(computecore.E_INVALIDARG, "%s.HvSocket.HvSocketConfig.ServiceTable.%s: not a service GUID", f, id)
			}
		}
	}
	if d.VirtualSmb == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.VirtualSmb: missing required field (the share %q to boot from)", f, schema2.UVMOSShareName)
	}
	if d.VirtualSmb.DirectFileMappingInMB < 0 {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.VirtualSmb.DirectFileMappingInMB: %d is negative", f, d.VirtualSmb.DirectFileMappingInMB)
	}
	names := map[string]bool{}
	for i, sh := range d.VirtualSmb.Shares {
		field := fmt.Sprintf("%s.VirtualSmb.Shares[%d]", f, i)
		if err := validateShare(field, &sh); err != nil {
			return err
		}
		key := strings.ToLower(sh.Name)
		if names[key] {
			return hresult.Errorf(errAlreadyExists, "%s.Name: %q: a share of that name is already in the VM", field, sh.Name)
		}
		names[key] = true
	}
	if !names[schema2.UVMOSShareName] {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.VirtualSmb.Shares: no share named %q, which Chipset.Uefi.BootThis (VmbFs) boots from", f, schema2.UVMOSShareName)
	}
	return nil
}

// errAlreadyExists is HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS). Assumption: the code HCS returns
// for a duplicate share name or an occupied LUN is not documented (docs/notes/hyperv.md §3).
const errAlreadyExists computecore.HRESULT = 0x800700B7

// parseLUN checks a LUN key: a decimal number 0–63.
func parseLUN(s string) (uint8, error) {
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n >= schema2.SCSILUNsPerController || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("LUN %q is not a number 0-%d", s, schema2.SCSILUNsPerController-1)
	}
	return uint8(n), nil
}

func validateAttachment(field string, a *schema2.Attachment) error {
	switch {
	case a.Type == "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Type: missing required field", field)
	case !slices.Contains(attachmentTypes, a.Type):
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Type: %q is not one of %s", field, a.Type, strings.Join(attachmentTypes, ", "))
	case a.Type == "ExtensibleVirtualDisk" || a.Type == "Iso":
		return hresult.Errorf(computecore.E_NOTIMPL, "%s.Type: %q disks are not emulated", field, a.Type)
	case a.Path == "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Path: missing required field", field)
	}
	return nil
}

func validateShare(field string, sh *schema2.VirtualSmbShare) error {
	switch {
	case sh.Name == "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Name: missing required field", field)
	case strings.ContainsAny(sh.Name, `\/:*?"<>|`):
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Name: %q is not a share name", field, sh.Name)
	case sh.Path == "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Path: missing required field", field)
	}
	restrict := sh.Options != nil && sh.Options.RestrictFileAccess
	if len(sh.AllowedFiles) > 0 && !restrict {
		// hcsshim: AllowedFiles are honoured only with RestrictFileAccess (internal/uvm/vsmb.go).
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.AllowedFiles: needs Options.RestrictFileAccess", field)
	}
	for i, f := range sh.AllowedFiles {
		if f == "" || strings.ContainsAny(f, `\/`) {
			return hresult.Errorf(computecore.E_INVALIDARG, "%s.AllowedFiles[%d]: %q is not a file name in the shared folder", field, i, f)
		}
	}
	if sh.Options != nil && sh.Options.SingleFileMapping && !restrict {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Options.SingleFileMapping: needs RestrictFileAccess", field)
	}
	return nil
}

// decodeHostedSystem decodes ComputeSystem.HostedSystem (free-form "Any" in the schema) strictly
// as a HostedSystem, naming fields from "HostedSystem".
func decodeHostedSystem(v any) (*schema2.HostedSystem, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem: %v", err)
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem: %v", err)
	}
	if err := hresult.CheckShape("HostedSystem", raw, reflect.TypeOf(schema2.HostedSystem{})); err != nil {
		return nil, err
	}
	var hs schema2.HostedSystem
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem: %v", err)
	}
	switch {
	case hs.SchemaVersion == nil:
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem.SchemaVersion: missing required field")
	case hs.SchemaVersion.Major != 2:
		return nil, hresult.Errorf(computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION, "HostedSystem.SchemaVersion: %d.%d is not supported (2.x is)", hs.SchemaVersion.Major, hs.SchemaVersion.Minor)
	case hs.Container == nil:
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem.Container: missing required field")
	case hs.Container.Storage == nil || hs.Container.Storage.Path == "":
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem.Container.Storage.Path: missing required field (the guest path of the container's combined layers)")
	}
	return &hs, nil
}

// prefixField puts field in front of the message of an *hresult.Error (a check written for a top-level
// document run on a nested one), keeping its HRESULT.
func prefixField(err error, field string) error {
	e := hresult.As(err)
	return &hresult.Error{HResult: e.HResult, Message: field + e.Message}
}
