package schema2

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The JSON names are the wire format; these documents are spelled as in Microsoft's HCS schema
// reference, so a renamed field or a lost omitempty fails here.
func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"empty container", &ComputeSystem{Owner: "runhcs", SchemaVersion: &SchemaV21, Container: &Container{}},
			`{"Owner":"runhcs","SchemaVersion":{"Major":2,"Minor":1},"Container":{}}`},
		{"container", &Container{
			Storage:           &Storage{Layers: []Layer{{Id: "8d2c", Path: `C:\l\1`}}, Path: `\\?\Volume{1}\`, QoS: &StorageQoS{IopsMaximum: 100}},
			MappedDirectories: []MappedDirectory{{HostPath: `C:\h`, ContainerPath: `C:\c`, ReadOnly: true}},
			Memory:            &Memory{SizeInMB: 256},
			Processor:         &Processor{Count: 2, Maximum: 5000, Weight: 100},
			Networking:        &Networking{Namespace: "ns"},
		}, `{"Storage":{"Layers":[{"Id":"8d2c","Path":"C:\\l\\1"}],"Path":"\\\\?\\Volume{1}\\","QoS":{"IopsMaximum":100}},` +
			`"MappedDirectories":[{"HostPath":"C:\\h","ContainerPath":"C:\\c","ReadOnly":true}],"Memory":{"SizeInMB":256},` +
			`"Processor":{"Count":2,"Maximum":5000,"Weight":100},"Networking":{"Namespace":"ns"}}`},
		{"process parameters", &ProcessParameters{CommandLine: `cmd /c echo`, WorkingDirectory: `C:\`,
			Environment: map[string]string{"A": "1"}, EmulateConsole: true, CreateStdInPipe: true, CreateStdOutPipe: true, ConsoleSize: [2]uint16{24, 80}},
			`{"CommandLine":"cmd /c echo","WorkingDirectory":"C:\\","Environment":{"A":"1"},"EmulateConsole":true,"CreateStdInPipe":true,"CreateStdOutPipe":true,"ConsoleSize":[24,80]}`},
		{"process parameters without console size", &ProcessParameters{CommandLine: "x"}, `{"CommandLine":"x"}`},
		{"modify limit", &ModifySettingRequest{ResourcePath: ResourcePathContainerMemory, RequestType: RequestTypeUpdate, Settings: 512},
			`{"ResourcePath":"Container/Memory/SizeInMB","RequestType":"Update","Settings":512}`},
		{"resize", &ProcessModifyRequest{Operation: ModifyProcessConsoleSize, ConsoleSize: &ConsoleSize{Height: 30, Width: 100}},
			`{"Operation":"ConsoleSize","ConsoleSize":{"Height":30,"Width":100}}`},
		{"close stdin", &ProcessModifyRequest{Operation: ModifyProcessCloseHandle, CloseHandle: &CloseHandle{Handle: StdHandleStdIn}},
			`{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`},
		{"signal", &SignalProcessOptions{Signal: SignalCtrlBreak}, `{"Signal":"CtrlBreak"}`},
		{"query", &PropertyQuery{PropertyTypes: []PropertyType{PropertyTypeStatistics, PropertyTypeProcessList}},
			`{"PropertyTypes":["Statistics","ProcessList"]}`},
		{"statistics without times", &Statistics{Processor: &ProcessorStats{TotalRuntime100ns: 1}}, `{"Processor":{"TotalRuntime100ns":1}}`},
		{"statistics", &Statistics{Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Uptime100ns: 9},
			`{"Timestamp":"2026-01-02T03:04:05Z","Uptime100ns":9}`},
		{"exit status", &SystemExitStatus{Status: 0, ExitType: NotificationGracefulExit}, `{"Status":0,"ExitType":"GracefulExit"}`},
		{"system query", &SystemQuery{Ids: []string{"a"}, Types: []SystemType{SystemTypeContainer}}, `{"Ids":["a"],"Types":["Container"]}`},
		{"hosted", &ComputeSystem{Owner: "o", SchemaVersion: &SchemaV21, HostingSystemId: "p@vm", ShouldTerminateOnLastHandleClosed: true,
			HostedSystem: &HostedSystem{SchemaVersion: &SchemaV21, Container: &Container{Storage: &Storage{Path: `C:\mounts\scsi\m0`,
				Layers: []Layer{{Id: "1", Path: VSMBGuestPath("s1")}}}}}},
			`{"Owner":"o","SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"p@vm","HostedSystem":{"SchemaVersion":{"Major":2,"Minor":1},` +
				`"Container":{"Storage":{"Layers":[{"Id":"1","Path":"\\\\?\\VMSMB\\VSMB-{dcc079ae-60ba-4d07-847c-3493609c0870}\\s1"}],"Path":"C:\\mounts\\scsi\\m0"}}},` +
				`"ShouldTerminateOnLastHandleClosed":true}`},
		{"guest request", &ModifySettingRequest{ResourcePath: fmt.Sprintf(ResourcePathSCSIFormat, "c", 1), RequestType: RequestTypeAdd,
			Settings:     &Attachment{Type: "VirtualDisk", Path: `C:\s.vhdx`},
			GuestRequest: &GuestModifySettingRequest{ResourceType: ResourceTypeMappedVirtualDisk, RequestType: RequestTypeAdd, Settings: &MappedVirtualDisk{ContainerPath: `C:\m`, Lun: 1}}},
			`{"ResourcePath":"VirtualMachine/Devices/Scsi/c/Attachments/1","RequestType":"Add","Settings":{"Type":"VirtualDisk","Path":"C:\\s.vhdx"},` +
				`"GuestRequest":{"ResourceType":"MappedVirtualDisk","RequestType":"Add","Settings":{"ContainerPath":"C:\\m","Lun":1}}}`},
		{"combined layers", &CombinedLayers{ContainerRootPath: `C:\m`, Layers: []Layer{{Id: "1", Path: "p"}}},
			`{"Layers":[{"Id":"1","Path":"p"}],"ContainerRootPath":"C:\\m"}`},
		{"boot", &Uefi{BootThis: &UefiBootEntry{DeviceType: UVMBootDeviceTypeVmbFs, DevicePath: UVMBootDevicePath}},
			`{"BootThis":{"DeviceType":"VmbFs","DevicePath":"\\EFI\\Microsoft\\Boot\\bootmgfw.efi"}}`},
		{"processor topology", &ProcessorTopology{LogicalProcessorCount: 2, LogicalProcessors: []LogicalProcessor{{LpIndex: 1, CoreId: 1}}},
			`{"LogicalProcessorCount":2,"LogicalProcessors":[{"LpIndex":1,"CoreId":1}]}`},
		{"vm", &ComputeSystem{VirtualMachine: &VirtualMachine{
			ComputeTopology: &Topology{Memory: &VirtualMachineMemory{SizeInMB: 1024, AllowOvercommit: true}, Processor: &VirtualMachineProcessor{Count: 2}},
			Devices: &Devices{
				Scsi:       map[string]Scsi{"0": {Attachments: map[string]Attachment{"0": {Type: "VirtualDisk", Path: `C:\s.vhdx`}}}},
				VirtualSmb: &VirtualSmb{Shares: []VirtualSmbShare{{Name: "os", Path: `C:\l`, Options: &VirtualSmbShareOptions{ReadOnly: true}}}},
			},
		}}, `{"VirtualMachine":{"ComputeTopology":{"Memory":{"SizeInMB":1024,"AllowOvercommit":true},"Processor":{"Count":2}},` +
			`"Devices":{"Scsi":{"0":{"Attachments":{"0":{"Type":"VirtualDisk","Path":"C:\\s.vhdx"}}}},"VirtualSmb":{"Shares":[{"Name":"os","Path":"C:\\l","Options":{"ReadOnly":true}}]}}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

func TestUnmarshalProperties(t *testing.T) {
	doc := `{"Id":"c1","SystemType":"Container","Name":"c1","Owner":"runhcs","State":"Running","RuntimeOsType":"Windows",
	"Statistics":{"Timestamp":"2026-01-02T03:04:05Z","ContainerStartTime":"2026-01-02T03:00:00Z","Uptime100ns":2400000000,
	"Processor":{"TotalRuntime100ns":30,"RuntimeUser100ns":20,"RuntimeKernel100ns":10},
	"Memory":{"MemoryUsageCommitBytes":100,"MemoryUsageCommitPeakBytes":200,"MemoryUsagePrivateWorkingSetBytes":50},
	"Storage":{"ReadCountNormalized":1,"ReadSizeBytes":2,"WriteCountNormalized":3,"WriteSizeBytes":4}},
	"ProcessList":[{"ProcessId":4,"ImageName":"workload.exe","UserTime100ns":7}]}`
	var p Properties
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	s := p.Statistics
	switch {
	case p.Id != "c1" || p.SystemType != SystemTypeContainer || p.State != StateRunning:
		t.Errorf("basic properties: %+v", p)
	case s == nil || s.Processor.TotalRuntime100ns != 30 || s.Memory.MemoryUsageCommitPeakBytes != 200 || s.Storage.WriteSizeBytes != 4 || s.Uptime100ns != 2400000000:
		t.Errorf("statistics: %+v", s)
	case len(p.ProcessList) != 1 || p.ProcessList[0].ImageName != "workload.exe" || p.ProcessList[0].UserTime100ns != 7:
		t.Errorf("process list: %+v", p.ProcessList)
	}
}
