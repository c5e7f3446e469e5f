package compute

import (
	"errors"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
)

// minimalVM is the smallest utility VM document the emulator accepts: what hcsshim always sends.
const minimalVM = `{"Chipset":{"Uefi":{"BootThis":{"DeviceType":"VmbFs","DevicePath":"\\EFI\\Microsoft\\Boot\\bootmgfw.efi"}}},` +
	`"ComputeTopology":{"Memory":{"SizeInMB":1024},"Processor":{"Count":2}},` +
	`"Devices":{"VirtualSmb":{"Shares":[{"Name":"os","Path":"/l/UtilityVM/Files","Options":{"ReadOnly":true}}]}}}`

// vmDoc is minimalVM with one replacement made in it (old → new), as a ComputeSystem.
func vmDoc(t *testing.T, old, new string) string {
	t.Helper()
	vm := minimalVM
	if old != "" {
		if !strings.Contains(vm, old) {
			t.Fatalf("test bug: %q is not in the minimal VM", old)
		}
		vm = strings.Replace(vm, old, new, 1)
	}
	return `{"SchemaVersion":{"Major":2,"Minor":1},"Owner":"test","VirtualMachine":` + vm + `}`
}

func TestValidateVirtualMachine(t *testing.T) {
	const hostCPUs = 4
	scsi := func(ctrl, lun, att string) string {
		return `"Devices":{"Scsi":{"` + ctrl + `":{"Attachments":{"` + lun + `":` + att + `}}},`
	}
	tests := []struct {
		name, old, new string
		wantHR         computecore.HRESULT
		wantField      string
	}{
		{"minimal", "", "", 0, ""},
		{"hcsshim's document", `"Devices":{`, `"Devices":{"Scsi":{"df6d0690-79e5-55b6-a5ec-c1e2f77f580a":{"Attachments":{"0":{"Type":"VirtualDisk","Path":"/s/sandbox.vhdx"}}}},` +
			`"HvSocket":{"HvSocketConfig":{"DefaultBindSecurityDescriptor":"D:P(A;;FA;;;SY)","ServiceTable":{"172dad59-976d-45f2-8b6c-6d1b13f2ac4d":{"AllowWildcardBinds":true}}}},`, 0, ""},
		{"no chipset", `"Chipset":{"Uefi":{"BootThis":{"DeviceType":"VmbFs","DevicePath":"\\EFI\\Microsoft\\Boot\\bootmgfw.efi"}}},`, ``, computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset: missing required field"},
		{"no boot entry", `{"BootThis":{"DeviceType":"VmbFs","DevicePath":"\\EFI\\Microsoft\\Boot\\bootmgfw.efi"}}`, `{}`, computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset.Uefi.BootThis: missing"},
		{"boot from a disk", `"DeviceType":"VmbFs"`, `"DeviceType":"ScsiDrive"`, computecore.E_NOTIMPL, `BootThis.DeviceType: "ScsiDrive"`},
		{"boot from nonsense", `"DeviceType":"VmbFs"`, `"DeviceType":"Floppy"`, computecore.E_INVALIDARG, `BootThis.DeviceType: "Floppy"`},
		{"no boot path", `,"DevicePath":"\\EFI\\Microsoft\\Boot\\bootmgfw.efi"`, ``, computecore.HCS_E_INVALID_JSON, "BootThis.DevicePath: missing"},
		{"VmbFsRootPath", `"DeviceType":"VmbFs"`, `"DeviceType":"VmbFs","VmbFsRootPath":"/x"`, computecore.E_NOTIMPL, "BootThis.VmbFsRootPath"},
		{"unknown field", `"SizeInMB":1024`, `"SizeInMB":1024,"SizeInGB":1`, computecore.HCS_E_INVALID_JSON, "VirtualMachine.ComputeTopology.Memory.SizeInGB: unknown field"},
		{"no memory", `"SizeInMB":1024`, `"SizeInMB":0`, computecore.E_INVALIDARG, "Memory.SizeInMB: 0"},
		{"negative memory", `"SizeInMB":1024`, `"SizeInMB":-1`, computecore.E_INVALIDARG, "Memory.SizeInMB: -1"},
		{"deferred commit without overcommit", `"SizeInMB":1024`, `"SizeInMB":1024,"EnableDeferredCommit":true`, computecore.E_INVALIDARG, "EnableDeferredCommit"},
		{"no processor", `,"Processor":{"Count":2}`, ``, computecore.HCS_E_INVALID_JSON, "ComputeTopology.Processor: missing"},
		{"zero processors", `"Count":2`, `"Count":0`, computecore.E_INVALIDARG, "Processor.Count: 0"},
		{"more processors than the host", `"Count":2`, `"Count":5`, computecore.E_INVALIDARG, "Processor.Count: 5 is more than the host's 4"},
		{"limit out of range", `"Count":2`, `"Count":2,"Limit":100001`, computecore.E_INVALIDARG, "Processor.Limit: 100001"},
		{"weight out of range", `"Count":2`, `"Count":2,"Weight":10001`, computecore.E_INVALIDARG, "Processor.Weight: 10001"},
		{"no devices", `,"Devices":{"VirtualSmb":{"Shares":[{"Name":"os","Path":"/l/UtilityVM/Files","Options":{"ReadOnly":true}}]}}`, ``, computecore.HCS_E_INVALID_JSON, "VirtualMachine.Devices: missing"},
		{"no os share", `"Name":"os"`, `"Name":"boot"`, computecore.E_INVALIDARG, `no share named "os"`},
		{"share without a path", `,"Path":"/l/UtilityVM/Files"`, ``, computecore.HCS_E_INVALID_JSON, "VirtualSmb.Shares[0].Path: missing"},
		{"duplicate share", `"Shares":[`, `"Shares":[{"Name":"OS","Path":"/x"},`, errAlreadyExists, `Shares[1].Name: "os"`},
		{"allowed files without restriction", `"Options":{"ReadOnly":true}`, `"Options":{"ReadOnly":true},"AllowedFiles":["a"]`, computecore.E_INVALIDARG, "Shares[0].AllowedFiles: needs Options.RestrictFileAccess"},
		{"single file mapping without restriction", `"Options":{"ReadOnly":true}`, `"Options":{"SingleFileMapping":true}`, computecore.E_INVALIDARG, "SingleFileMapping"},
		{"LUN 64", `"Devices":{`, scsi("c", "64", `{"Type":"VirtualDisk","Path":"/d"}`), computecore.E_INVALIDARG, `Scsi.c.Attachments.64: LUN "64"`},
		{"LUN not a number", `"Devices":{`, scsi("c", "x", `{"Type":"VirtualDisk","Path":"/d"}`), computecore.E_INVALIDARG, `Attachments.x`},
		{"LUN with a leading zero", `"Devices":{`, scsi("c", "01", `{"Type":"VirtualDisk","Path":"/d"}`), computecore.E_INVALIDARG, `Attachments.01`},
		{"LUN 63", `"Devices":{`, scsi("c", "63", `{"Type":"VirtualDisk","Path":"/d"}`), 0, ""},
		{"attachment without type", `"Devices":{`, scsi("c", "0", `{"Path":"/d"}`), computecore.HCS_E_INVALID_JSON, "Attachments.0.Type: missing"},
		{"attachment of unknown type", `"Devices":{`, scsi("c", "0", `{"Type":"Tape","Path":"/d"}`), computecore.E_INVALIDARG, `Attachments.0.Type: "Tape"`},
		{"attachment without path", `"Devices":{`, scsi("c", "0", `{"Type":"VirtualDisk"}`), computecore.HCS_E_INVALID_JSON, "Attachments.0.Path: missing"},
		{"five controllers", `"Devices":{`, `"Devices":{"Scsi":{"a":{},"b":{},"c":{},"d":{},"e":{}},`, computecore.E_INVALIDARG, "Scsi: 5 controllers, at most 4"},
		{"service table key not a GUID", `"Devices":{`, `"Devices":{"HvSocket":{"HvSocketConfig":{"ServiceTable":{"log":{}}}},`, computecore.E_INVALIDARG, "ServiceTable.log"},
		{"NIC at create without an endpoint", `"Devices":{`, `"Devices":{"NetworkAdapters":{"n":{"MacAddress":"00-15-5D-00-00-01"}},`, computecore.HCS_E_INVALID_JSON, "NetworkAdapters.n.EndpointId: missing"},
		{"NIC at create", `"Devices":{`, `"Devices":{"NetworkAdapters":{"n":{"EndpointId":"e"}},`, 0, ""}, // the endpoint is looked up at create
		{"guest state", `"Chipset":`, `"GuestState":{"GuestStateFilePath":"/g"},"Chipset":`, computecore.E_NOTIMPL, "VirtualMachine.GuestState"},
		{"Linux kernel", `"Chipset":{`, `"Chipset":{"LinuxKernelDirect":{"KernelFilePath":"/k"},`, computecore.E_NOTIMPL, "LinuxKernelDirect"},
		{"guest connection", `"Chipset":`, `"GuestConnection":{},"Chipset":`, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateComputeSystem(vmDoc(t, tt.old, tt.new), hostCPUs, nil)
			if tt.wantHR == 0 {
				if err != nil {
					t.Fatalf("valid VM refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantHR) || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %v, want %v naming %q", err, tt.wantHR, tt.wantField)
			}
		})
	}
	t.Run("schema 2.0", func(t *testing.T) {
		doc := strings.Replace(vmDoc(t, "", ""), `"Minor":1`, `"Minor":0`, 1)
		if _, err := ValidateComputeSystem(doc, hostCPUs, nil); !errors.Is(err, computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION) {
			t.Errorf("error %v, want HCS_E_UNSUPPORTED_PROTOCOL_VERSION", err)
		}
	})
}

func TestValidateHostedSystem(t *testing.T) {
	doc := func(hosted string) string {
		return `{"SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"p@vm","HostedSystem":` + hosted + `}`
	}
	tests := []struct {
		name, hosted string
		wantHR       computecore.HRESULT
		wantField    string
	}{
		{"valid", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"C:\\c","Layers":[{"Id":"1","Path":"\\\\?\\VMSMB\\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\\s1"}]}}}`, 0, ""},
		{"not an object", `[]`, computecore.HCS_E_INVALID_JSON, "HostedSystem: expected an object"},
		{"unknown field", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"C:\\c"}},"VirtualMachine":{}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem.VirtualMachine: unknown field"},
		{"unknown nested field", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"C:\\c","Bogus":1}}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem.Container.Storage.Bogus: unknown field"},
		{"no schema version", `{"Container":{"Storage":{"Path":"C:\\c"}}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem.SchemaVersion: missing"},
		{"no container", `{"SchemaVersion":{"Major":2,"Minor":1}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem.Container: missing"},
		{"no storage path", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem.Container.Storage.Path: missing"},
		{"too many processors", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"C:\\c"},"Processor":{"Count":9}}}`, computecore.E_INVALIDARG, "HostedSystem.Container.Processor.Count: 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateComputeSystem(doc(tt.hosted), 4, nil)
			if tt.wantHR == 0 {
				if err != nil {
					t.Fatalf("valid hosted system refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantHR) || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %v, want %v naming %q", err, tt.wantHR, tt.wantField)
			}
		})
	}
}
