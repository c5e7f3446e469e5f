package oci

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/protocols/options"
)

var update = flag.Bool("update", false, "rewrite the golden documents in testdata/")

func u64(v uint64) *uint64 { return &v }
func u16(v uint16) *uint16 { return &v }

func baseSpec() *specs.Spec {
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "web-0",
		Process: &specs.Process{
			Args: []string{`C:\workload\workload.exe`, "echo", "hello from a windows container"},
			Env:  []string{`PATH=C:\Windows\System32;C:\Windows;C:\workload`, "EMPTY="},
			Cwd:  `C:\`,
			User: specs.User{Username: "ContainerUser"},
		},
		Windows: &specs.Windows{},
	}
}

var parents = []string{"/var/lib/wcow/snapshots/2", "/var/lib/wcow/snapshots/1"}

// TestContainerDocument checks the OCI→HCS translation against golden documents: the
// document is what HCS receives, so any change to it must be deliberate (-update).
func TestContainerDocument(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*specs.Spec)
	}{
		{"minimal", func(*specs.Spec) {}},
		{"mounts", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{
				{Source: `C:\data`, Destination: `C:\data`, Options: []string{"ro"}},
				{Source: `C:\logs`, Destination: `C:\logs`, Type: "bind", Options: []string{"rw"}},
				{Source: `C:\config\app.ini`, Destination: `C:\app\app.ini`, Options: []string{"ro"}},
				{Source: `\\.\pipe\docker_engine`, Destination: `\\.\pipe\docker_engine`},
			}
		}},
		{"resources", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{
				CPU:     &specs.WindowsCPUResources{Maximum: u16(5000), Shares: u16(200)},
				Memory:  &specs.WindowsMemoryResources{Limit: u64(256 << 20)},
				Storage: &specs.WindowsStorageResources{Iops: u64(1000), Bps: u64(1 << 20)},
			}
		}},
		{"cpu-count", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(2)}}
		}},
		{"annotations", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(256 << 20)}}
			s.Annotations = map[string]string{
				AnnotationProcessorCount:       "1",
				AnnotationMemorySizeInMB:       "512",
				AnnotationStorageQoSIops:       "50",
				"io.kubernetes.cri.sandbox-id": "pod",
			}
		}},
		{"network", func(s *specs.Spec) {
			s.Windows.Network = &specs.WindowsNetwork{
				NetworkNamespace:         "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11",
				DNSSearchList:            []string{"svc.cluster.local", "cluster.local"},
				AllowUnqualifiedDNSQuery: true,
				EndpointList:             []string{"ignored-with-namespace"},
			}
		}},
		{"network-endpoints", func(s *specs.Spec) {
			// No namespace: the endpoints travel as adapters until the shim makes one.
			s.Windows.Network = &specs.WindowsNetwork{
				EndpointList:               []string{"0b0e5f3c-1111-4222-8333-944455556666"},
				NetworkSharedContainerName: "pause-0",
			}
		}},
		{"network-dns-only", func(s *specs.Spec) {
			s.Windows.Network = &specs.WindowsNetwork{DNSSearchList: []string{"cluster.local"}}
		}},
		{"linux-section-ignored", func(s *specs.Spec) {
			s.Linux = &specs.Linux{Devices: []specs.LinuxDevice{{Path: "/dev/null", Type: "c", Major: 1, Minor: 3}}}
		}},
		{"credential-spec", func(s *specs.Spec) {
			s.Windows.CredentialSpec = testCredentialSpec
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(s)
			doc, err := ContainerDocument(s, "/var/lib/wcow/snapshots/3/mount", parents)
			if err != nil {
				t.Fatalf("ContainerDocument: %v", err)
			}
			got, err := json.MarshalIndent(doc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden(t, filepath.Join("testdata", tc.name+".json"), got)
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestContainerDocumentErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*specs.Spec)
		want   string // a substring naming the field
	}{
		{"no windows section", func(s *specs.Spec) { s.Windows = nil }, "spec has no windows section"},
		{"namespace not a GUID", func(s *specs.Spec) {
			s.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: "/var/run/netns/cni-1"}
		}, `windows.network.networkNamespace="/var/run/netns/cni-1"`},
		{"endpoint not a GUID", func(s *specs.Spec) {
			s.Windows.Network = &specs.WindowsNetwork{EndpointList: []string{"0b0e5f3c-1111-4222-8333-944455556666", "eth0"}}
		}, `windows.network.endpointList[1]="eth0"`},
		{"cpu count zero", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(0)}}
		}, "windows.resources.cpu.count=0"},
		{"cpu maximum too large", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(10001)}}
		}, "windows.resources.cpu.maximum=10001"},
		{"cpu shares too large", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Shares: u16(20000)}}
		}, "windows.resources.cpu.shares=20000"},
		{"count with maximum", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(2), Maximum: u16(100)}}
		}, "count (2) cannot be combined"},
		{"memory under 1MiB", func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(1000)}}
		}, "windows.resources.memory.limit=1000"},
		{"bad annotation", func(s *specs.Spec) {
			s.Annotations = map[string]string{AnnotationProcessorCount: "-1"}
		}, AnnotationProcessorCount + `="-1"`},
		{"annotation limit", func(s *specs.Spec) {
			s.Annotations = map[string]string{AnnotationProcessorLimit: "0"}
		}, AnnotationProcessorLimit},
		{"mount type", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Type: "tmpfs", Source: "x", Destination: `C:\x`}}
		}, `mounts[0].type="tmpfs"`},
		{"mount source", func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Destination: `C:\x`}}
		}, "mounts[0].source"},
		{"credential spec", func(s *specs.Spec) { s.Windows.CredentialSpec = "not json" }, "windows.credentialSpec"},
		{"credential spec field", func(s *specs.Spec) {
			s.Windows.CredentialSpec = strings.Replace(testCredentialSpec, `"NetBiosName": "CONTOSO"`, `"NetBiosName": ""`, 1)
		}, `windows.credentialSpec.DomainJoinConfig.NetBiosName=""`},
		{"device id type", func(s *specs.Spec) {
			s.Windows.Devices = []specs.WindowsDevice{{ID: "x", IDType: "bogus"}}
		}, `windows.devices[0].idType="bogus"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(s)
			_, err := ContainerDocument(s, "/mnt", parents)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
			if !errdefs.IsInvalidArgument(err) && !errdefs.IsNotImplemented(err) {
				t.Errorf("error %v is neither InvalidArgument nor NotImplemented", err)
			}
		})
	}
}

func TestProcessParameters(t *testing.T) {
	tests := []struct {
		name string
		p    *specs.Process
		io   Stdio
	}{
		{"args", baseSpec().Process, Stdio{Stdout: true, Stderr: true}},
		{"terminal", &specs.Process{
			Args: []string{"cmd.exe"}, Terminal: true, Cwd: `C:\Users`,
			ConsoleSize: &specs.Box{Height: 40, Width: 120},
		}, Stdio{Stdin: true, Stdout: true, Stderr: true}},
		{"commandline", &specs.Process{CommandLine: `cmd /c "echo hi"`}, Stdio{Stdin: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pp, err := ProcessParameters(tc.p, tc.io)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(pp, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "process-"+tc.name+".json"), append(got, '\n'))
		})
	}
}

func TestProcessParametersErrors(t *testing.T) {
	tests := []struct {
		name string
		p    *specs.Process
		want string
	}{
		{"nothing to run", &specs.Process{}, "process.args"},
		{"both", &specs.Process{Args: []string{"a"}, CommandLine: "a"}, "process.commandLine and process.args"},
		{"env", &specs.Process{Args: []string{"a"}, Env: []string{"NOEQUALS"}}, `process.env[0]="NOEQUALS"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ProcessParameters(tc.p, Stdio{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errdefs.IsInvalidArgument(err) {
				t.Errorf("err = %v, want InvalidArgument naming %q", err, tc.want)
			}
		})
	}
}

// TestCommandLine checks escaping against the rules CommandLineToArgvW applies (the same
// cases Go's syscall.EscapeArg documents).
func TestCommandLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{`C:\workload\workload.exe`, "echo", "hi"}, `C:\workload\workload.exe echo hi`},
		{[]string{"echo", "hello world"}, `echo "hello world"`},
		{[]string{"a", ""}, `a ""`},
		{[]string{`say "hi"`}, `"say \"hi\""`},
		{[]string{`C:\dir with space\`}, `"C:\dir with space\\"`},
		{[]string{`a\\"b c`}, `"a\\\\\"b c"`},
		{[]string{`no\quote`}, `no\quote`},
	}
	for _, tc := range tests {
		if got := CommandLine(tc.args); got != tc.want {
			t.Errorf("CommandLine(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestUpdateRequests(t *testing.T) {
	reqs, err := UpdateRequests(&specs.WindowsResources{
		CPU:    &specs.WindowsCPUResources{Maximum: u16(2500)},
		Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(reqs, "", "  ")
	golden(t, filepath.Join("testdata", "update.json"), append(got, '\n'))

	for name, r := range map[string]*specs.WindowsResources{
		"nil":     nil,
		"empty":   {},
		"storage": {Storage: &specs.WindowsStorageResources{Iops: u64(1)}},
		"bad cpu": {CPU: &specs.WindowsCPUResources{Maximum: u16(0)}},
	} {
		if _, err := UpdateRequests(r); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestLayerIDStable(t *testing.T) {
	a, b := layerID("/x/snapshots/1"), layerID(`D:\other\1\`)
	if a != b {
		t.Errorf("layer id depends on more than the folder name: %s vs %s", a, b)
	}
	if layerID("/x/2") == a {
		t.Error("distinct layers share an id")
	}
	if len(a) != 36 || a[14] != '5' {
		t.Errorf("layer id %s is not a version-5 style GUID", a)
	}
}

// TestIsolation: each way of asking for Hyper-V isolation is recognised and recorded as a
// windows.hyperv section; a spec that asks for nothing is process-isolated; a Hyper-V spec under
// non-empty PROCESS options is refused naming what asked (hcsshim's createInternal).
func TestIsolation(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*specs.Spec)
		opts    *options.Options
		want    Isolation
		refused string // the error names this; "" = not refused
	}{
		{"default", func(*specs.Spec) {}, nil, IsolationProcess, ""},
		{"process option", func(*specs.Spec) {}, &options.Options{SandboxIsolation: options.Options_PROCESS}, IsolationProcess, ""},
		{"other annotation value", func(s *specs.Spec) {
			s.Annotations = map[string]string{AnnotationLegacyIsolation: "process"}
		}, nil, IsolationProcess, ""},
		{"spec section", func(s *specs.Spec) { s.Windows.HyperV = &specs.WindowsHyperV{} }, nil, IsolationHyperV, ""},
		{"runtime option", func(*specs.Spec) {}, &options.Options{SandboxIsolation: options.Options_HYPERVISOR}, IsolationHyperV, ""},
		{"legacy annotation", func(s *specs.Spec) {
			s.Annotations = map[string]string{AnnotationLegacyIsolation: "hyperv"}
		}, nil, IsolationHyperV, ""},
		// sandbox_isolation=PROCESS alone encodes as empty options: not a choice (hcsshim).
		{"spec section, bare process option", func(s *specs.Spec) { s.Windows.HyperV = &specs.WindowsHyperV{} },
			&options.Options{SandboxIsolation: options.Options_PROCESS}, IsolationHyperV, ""},
		{"spec section under process options", func(s *specs.Spec) { s.Windows.HyperV = &specs.WindowsHyperV{} },
			&options.Options{SandboxIsolation: options.Options_PROCESS, LogLevel: "info"}, 0, "windows.hyperv"},
		{"legacy annotation under process options", func(s *specs.Spec) {
			s.Annotations = map[string]string{AnnotationLegacyIsolation: "hyperv"}
		}, &options.Options{VmMemorySizeInMb: 2048}, 0, AnnotationLegacyIsolation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(s)
			got, err := ResolveIsolation(s, tc.opts)
			if tc.refused != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "PROCESS") {
					t.Fatalf("ResolveIsolation: %v, want InvalidArgument naming %q and PROCESS", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveIsolation: %v", err)
			}
			if got != tc.want {
				t.Errorf("ResolveIsolation = %v, want %v", got, tc.want)
			}
			if hv := s.Windows.HyperV != nil; hv != (tc.want == IsolationHyperV) {
				t.Errorf("windows.hyperv set = %v for %v isolation", hv, got)
			}
		})
	}
}

func TestApplyOptionsAnnotations(t *testing.T) {
	s := baseSpec()
	s.Annotations = map[string]string{"a": "spec"}
	ApplyOptions(s, &options.Options{DefaultContainerAnnotations: map[string]string{"a": "default", "b": "default"}})
	if s.Annotations["a"] != "spec" || s.Annotations["b"] != "default" {
		t.Errorf("annotations %v: the spec's must win, the defaults fill the rest", s.Annotations)
	}
	s = baseSpec()
	s.Annotations = nil
	ApplyOptions(s, nil)
	if s.Annotations != nil {
		t.Errorf("no options added annotations %v", s.Annotations)
	}
}

// testCredentialSpec is a credential spec as Microsoft's New-CredentialSpec writes it.
const testCredentialSpec = `{
  "CmsPlugins": ["ActiveDirectory"],
  "DomainJoinConfig": {
    "Sid": "S-1-5-21-702590844-1001920913-2680819671",
    "MachineAccountName": "webapp01",
    "Guid": "56d9b66c-d746-4f87-bd26-26760cfdca2e",
    "DnsTreeName": "contoso.com",
    "DnsName": "contoso.com",
    "NetBiosName": "CONTOSO"
  },
  "ActiveDirectoryConfig": {
    "GroupManagedServiceAccounts": [
      {"Name": "webapp01", "Scope": "contoso.com"},
      {"Name": "webapp01", "Scope": "CONTOSO"}
    ]
  }
}`
