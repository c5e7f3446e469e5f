package protocols_test

import (
	"testing"

	cgroupstats "github.com/containerd/cgroups/v3/cgroup1/stats"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/protocols/diag"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
)

// TestWireNames pins the full names and field numbers that other programs (containerd's CRI, ctr,
// hcsshim's clients) depend on. The expected values are hcsshim's published .proto files.
func TestWireNames(t *testing.T) {
	tests := []struct {
		msg    proto.Message
		name   protoreflect.FullName
		fields map[protoreflect.Name]protoreflect.FieldNumber
	}{
		{
			msg:  &options.Options{},
			name: "containerd.runhcs.v1.Options",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{
				"debug": 1, "debug_type": 2, "registry_root": 3, "sandbox_image": 4,
				"sandbox_platform": 5, "sandbox_isolation": 6, "boot_files_root_path": 7,
				"vm_processor_count": 8, "vm_memory_size_in_mb": 9, "GPUVHDPath": 10,
				"scale_cpu_limits_to_sandbox": 11, "default_container_scratch_size_in_gb": 12,
				"default_vm_scratch_size_in_gb": 13, "share_scratch": 14, "NCProxyAddr": 15,
				"log_level": 16, "io_retry_timeout_in_sec": 17, "default_container_annotations": 18,
				"no_inherit_host_timezone": 19, "scrub_logs": 20,
			},
		},
		{
			msg:  &options.ProcessDetails{},
			name: "containerd.runhcs.v1.ProcessDetails",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{
				"image_name": 1, "created_at": 2, "kernel_time_100_ns": 3, "memory_commit_bytes": 4,
				"memory_working_set_private_bytes": 5, "memory_working_set_shared_bytes": 6,
				"process_id": 7, "user_time_100_ns": 8, "exec_id": 9,
			},
		},
		{
			msg:    &stats.Statistics{},
			name:   "containerd.runhcs.stats.v1.Statistics",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{"windows": 1, "linux": 2, "vm": 3},
		},
		{
			msg:  &stats.WindowsContainerStatistics{},
			name: "containerd.runhcs.stats.v1.WindowsContainerStatistics",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{
				"timestamp": 1, "container_start_time": 2, "uptime_ns": 3, "processor": 4, "memory": 5, "storage": 6,
			},
		},
		{
			msg:  &stats.VirtualMachineMemoryStatistics{},
			name: "containerd.runhcs.stats.v1.VirtualMachineMemoryStatistics",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{
				"working_set_bytes": 1, "virtual_node_count": 2, "vm_memory": 3,
			},
		},
		{
			msg:  &diag.ExecProcessRequest{},
			name: "containerd.runhcs.v1.diag.ExecProcessRequest",
			fields: map[protoreflect.Name]protoreflect.FieldNumber{
				"args": 1, "workdir": 2, "terminal": 3, "stdin": 4, "stdout": 5, "stderr": 6,
			},
		},
	}
	for _, tt := range tests {
		t.Run(string(tt.name), func(t *testing.T) {
			d := tt.msg.ProtoReflect().Descriptor()
			if d.FullName() != tt.name {
				t.Fatalf("full name = %q, want %q", d.FullName(), tt.name)
			}
			if got := d.Fields().Len(); got != len(tt.fields) {
				t.Errorf("%s has %d fields, want %d", tt.name, got, len(tt.fields))
			}
			for name, num := range tt.fields {
				f := d.Fields().ByName(name)
				if f == nil {
					t.Errorf("%s has no field %q", tt.name, name)
					continue
				}
				if f.Number() != num {
					t.Errorf("%s.%s = %d, want %d", tt.name, name, f.Number(), num)
				}
			}
		})
	}
}

func TestIsolationEnum(t *testing.T) {
	if options.Options_PROCESS != 0 || options.Options_HYPERVISOR != 1 {
		t.Fatalf("SandboxIsolation PROCESS=%d HYPERVISOR=%d, want 0 and 1", options.Options_PROCESS, options.Options_HYPERVISOR)
	}
}

// TestLinuxArmIsCgroupMetrics checks that the linux arm is the cgroups module's own Go type and
// message name, which is what keeps it wire compatible with hcsshim's stats.
func TestLinuxArmIsCgroupMetrics(t *testing.T) {
	f := (&stats.Statistics{}).ProtoReflect().Descriptor().Fields().ByName("linux")
	if got := f.Message().FullName(); got != "io.containerd.cgroups.v1.Metrics" {
		t.Fatalf("linux arm is %q, want io.containerd.cgroups.v1.Metrics", got)
	}
	in := &stats.Statistics{Container: &stats.Statistics_Linux{Linux: &cgroupstats.Metrics{
		Pids: &cgroupstats.PidsStat{Current: 3, Limit: 10},
	}}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out stats.Statistics
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if got := out.GetLinux().GetPids().GetCurrent(); got != 3 {
		t.Fatalf("round trip pids.current = %d, want 3", got)
	}
}

// TestTypeURLs checks the type URLs containerd puts on the Any it sends and receives.
func TestTypeURLs(t *testing.T) {
	tests := []struct {
		msg  proto.Message
		want string
	}{
		{&options.Options{SandboxIsolation: options.Options_HYPERVISOR}, "containerd.runhcs.v1.Options"},
		{&stats.Statistics{}, "containerd.runhcs.stats.v1.Statistics"},
	}
	for _, tt := range tests {
		a, err := typeurl.MarshalAny(tt.msg)
		if err != nil {
			t.Fatalf("MarshalAny(%T): %v", tt.msg, err)
		}
		if a.GetTypeUrl() != tt.want {
			t.Errorf("type URL of %T = %q, want %q", tt.msg, a.GetTypeUrl(), tt.want)
		}
		back, err := typeurl.UnmarshalAny(&anypb.Any{TypeUrl: a.GetTypeUrl(), Value: a.GetValue()})
		if err != nil {
			t.Fatalf("UnmarshalAny(%s): %v", tt.want, err)
		}
		if !proto.Equal(back.(proto.Message), tt.msg) {
			t.Errorf("round trip of %s changed it: %v", tt.want, back)
		}
	}
}
