package compute

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// doc builds a container document around the given Container fields.
func containerDoc(container string) string {
	return `{"SchemaVersion":{"Major":2,"Minor":1},"Owner":"test","Container":` + container + `}`
}

func TestValidateComputeSystem(t *testing.T) {
	const hostCPUs = 4
	storage := `"Storage":{"Path":"/vol"}`
	exists := func(p string) error {
		if p == "/vol" || p == "/host" {
			return nil
		}
		return errors.New("no such file or directory")
	}
	tests := []struct {
		name      string
		doc       string
		wantHR    computecore.HRESULT // 0: valid
		wantField string              // what the message must name
	}{
		{"minimal container", containerDoc(`{` + storage + `}`), 0, ""},
		{"full container", containerDoc(`{` + storage + `,"Processor":{"Count":2,"Maximum":5000,"Weight":100},` +
			`"Memory":{"SizeInMB":512},"MappedDirectories":[{"HostPath":"/host","ContainerPath":"C:\\data","ReadOnly":true}],` +
			`"Networking":{"Namespace":"abc"},"GuestOs":{"HostName":"h"}}`), 0, ""},
		{"utility VM", `{"SchemaVersion":{"Major":2,"Minor":1},"VirtualMachine":` + minimalVM + `}`, 0, ""},
		{"empty utility VM", `{"SchemaVersion":{"Major":2,"Minor":1},"VirtualMachine":{}}`, computecore.HCS_E_INVALID_JSON, "VirtualMachine.Chipset: missing required field"},
		{"malformed", `{"SchemaVersion":`, computecore.HCS_E_INVALID_JSON, "malformed JSON"},
		{"trailing data", containerDoc(`{`+storage+`}`) + `{}`, computecore.HCS_E_INVALID_JSON, "after the document"},
		{"empty", ``, computecore.HCS_E_INVALID_JSON, "empty"},
		{"not an object", `[]`, computecore.HCS_E_INVALID_JSON, "expected an object"},
		{"unknown top-level field", `{"SchemaVersion":{"Major":2,"Minor":1},"Bogus":1}`, computecore.HCS_E_INVALID_JSON, "Bogus: unknown field"},
		{"unknown nested field", containerDoc(`{"Storage":{"Pathx":"/vol"}}`), computecore.HCS_E_INVALID_JSON, "Container.Storage.Pathx: unknown field"},
		{"field names are exact", containerDoc(`{"storage":{"Path":"/vol"}}`), computecore.HCS_E_INVALID_JSON, "Container.storage: unknown field"},
		{"unknown field in an array element", containerDoc(`{` + storage + `,"MappedDirectories":[{"HostPath":"/host","ContainerPath":"C:\\d","Bad":1}]}`),
			computecore.HCS_E_INVALID_JSON, "Container.MappedDirectories[0].Bad: unknown field"},
		{"wrong type", containerDoc(`{"Storage":{"Path":3}}`), computecore.HCS_E_INVALID_JSON, "Container.Storage.Path: expected a string, got a number"},
		{"wrong type of number", containerDoc(`{` + storage + `,"Processor":{"Count":"2"}}`), computecore.HCS_E_INVALID_JSON, "Container.Processor.Count: expected a number"},
		{"missing schema version", `{"Container":{` + storage + `}}`, computecore.HCS_E_INVALID_JSON, "SchemaVersion: missing required field"},
		{"unsupported schema version", `{"SchemaVersion":{"Major":1,"Minor":0},"Container":{` + storage + `}}`, computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION, "SchemaVersion"},
		{"neither container nor VM", `{"SchemaVersion":{"Major":2,"Minor":1}}`, computecore.HCS_E_INVALID_JSON, "Container: missing required field"},
		{"both container and VM", `{"SchemaVersion":{"Major":2,"Minor":1},"Container":{` + storage + `},"VirtualMachine":{}}`, computecore.HCS_E_INVALID_JSON, "only one"},
		{"both container and hosted system", `{"SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"uvm","Container":{` + storage + `},"HostedSystem":{}}`, computecore.HCS_E_INVALID_JSON, "only one"},
		{"missing storage", containerDoc(`{}`), computecore.HCS_E_INVALID_JSON, "Container.Storage: missing required field"},
		{"missing storage path", containerDoc(`{"Storage":{}}`), computecore.HCS_E_INVALID_JSON, "Container.Storage.Path: missing required field"},
		{"storage path does not exist", containerDoc(`{"Storage":{"Path":"/nope"}}`), computecore.E_PATH_NOT_FOUND, `Container.Storage.Path: "/nope"`},
		{"hosted container", `{"SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"uvm","HostedSystem":{"SchemaVersion":{"Major":2,"Minor":1},"Container":{"Storage":{"Path":"C:\\c"}}}}`, 0, ""},
		{"hosting system without hosted system", `{"SchemaVersion":{"Major":2,"Minor":1},"HostingSystemId":"uvm","Container":{}}`, computecore.HCS_E_INVALID_JSON, "HostedSystem: missing required field"},
		{"negative count", containerDoc(`{` + storage + `,"Processor":{"Count":-1}}`), computecore.E_INVALIDARG, "Container.Processor.Count: -1"},
		{"fractional count", containerDoc(`{` + storage + `,"Processor":{"Count":1.5}}`), computecore.E_INVALIDARG, "Container.Processor.Count: 1.5"},
		{"count overflows", containerDoc(`{` + storage + `,"Processor":{"Count":4294967296}}`), computecore.E_INVALIDARG, "Container.Processor.Count"},
		{"more processors than the host", containerDoc(`{` + storage + `,"Processor":{"Count":5}}`), computecore.E_INVALIDARG, "Container.Processor.Count: 5 is more than the host's 4"},
		{"maximum out of range", containerDoc(`{` + storage + `,"Processor":{"Maximum":10001}}`), computecore.E_INVALIDARG, "Container.Processor.Maximum: 10001"},
		{"weight out of range", containerDoc(`{` + storage + `,"Processor":{"Weight":20000}}`), computecore.E_INVALIDARG, "Container.Processor.Weight: 20000"},
		{"negative memory", containerDoc(`{` + storage + `,"Memory":{"SizeInMB":-5}}`), computecore.E_INVALIDARG, "Container.Memory.SizeInMB: -5"},
		{"mapped directory without host path", containerDoc(`{` + storage + `,"MappedDirectories":[{"ContainerPath":"C:\\d"}]}`),
			computecore.HCS_E_INVALID_JSON, "Container.MappedDirectories[0].HostPath: missing required field"},
		{"mapped directory on another drive", containerDoc(`{` + storage + `,"MappedDirectories":[{"HostPath":"/host","ContainerPath":"D:\\d"}]}`),
			computecore.E_INVALIDARG, "Container.MappedDirectories[0].ContainerPath"},
		{"mapped directory host path missing", containerDoc(`{` + storage + `,"MappedDirectories":[{"HostPath":"/gone","ContainerPath":"C:\\d"}]}`),
			computecore.E_PATH_NOT_FOUND, `Container.MappedDirectories[0].HostPath: "/gone"`},
		{"null is unset", containerDoc(`{` + storage + `,"Processor":null}`), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := ValidateComputeSystem(tt.doc, hostCPUs, exists)
			if tt.wantHR == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if cs == nil {
					t.Fatal("no document")
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", tt.doc)
			}
			if !errors.Is(err, tt.wantHR) {
				t.Errorf("error %v, want %v", err, tt.wantHR)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %q does not say %q", err, tt.wantField)
			}
		})
	}
}

func TestValidateProcessParameters(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		wantHR    computecore.HRESULT
		wantField string
	}{
		{"command line", `{"CommandLine":"cmd /c echo hi","WorkingDirectory":"C:\\","Environment":{"PATH":"C:\\Windows"},"CreateStdOutPipe":true}`, 0, ""},
		{"console size", `{"CommandLine":"cmd","EmulateConsole":true,"ConsoleSize":[25,80]}`, 0, ""},
		{"nothing to run", `{"WorkingDirectory":"C:\\"}`, computecore.HCS_E_INVALID_JSON, "CommandLine: missing required field"},
		{"unknown field", `{"CommandLine":"cmd","Bogus":true}`, computecore.HCS_E_INVALID_JSON, "Bogus: unknown field"},
		{"environment values are strings", `{"CommandLine":"cmd","Environment":{"A":1}}`, computecore.HCS_E_INVALID_JSON, "Environment.A: expected a string"},
		{"console size too long", `{"CommandLine":"cmd","ConsoleSize":[1,2,3]}`, computecore.E_INVALIDARG, "ConsoleSize: 3 elements"},
		{"console size out of range", `{"CommandLine":"cmd","ConsoleSize":[70000,2]}`, computecore.E_INVALIDARG, "ConsoleSize[0]: 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ValidateProcessParameters(tt.doc)
			if tt.wantHR == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantHR) || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error %v, want %v naming %q", err, tt.wantHR, tt.wantField)
			}
		})
	}
}

// FuzzValidateDocument checks that validation never panics, fails only with the HRESULTs HCS
// uses for bad documents and a message, and that what it accepts survives a round trip.
func FuzzValidateDocument(f *testing.F) {
	f.Add(containerDoc(`{"Storage":{"Path":"/vol"}}`))
	f.Add(containerDoc(`{"Storage":{"Pathx":"/vol"}}`))
	f.Add(`{"SchemaVersion":{"Major":2,"Minor":1},"VirtualMachine":{}}`)
	f.Add(`{"SchemaVersion":{"Major":2,"Minor":1},"VirtualMachine":` + minimalVM + `}`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, doc string) {
		cs, err := ValidateComputeSystem(doc, 2, nil)
		if err != nil {
			var e *hresult.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *hresult.Error", err)
			}
			switch e.HResult {
			case computecore.HCS_E_INVALID_JSON, computecore.E_INVALIDARG, computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION,
				computecore.E_NOTIMPL, errAlreadyExists:
			default:
				t.Fatalf("unexpected HRESULT %v for %q", e.HResult, doc)
			}
			if e.Message == "" {
				t.Fatal("error without a message")
			}
			return
		}
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatalf("marshal accepted document: %v", err)
		}
		var again *schema2.ComputeSystem
		if again, err = ValidateComputeSystem(string(b), 2, nil); err != nil {
			t.Fatalf("accepted %q but not its re-encoding %s: %v", doc, b, err)
		}
		if b2, _ := json.Marshal(again); string(b2) != string(b) {
			t.Fatalf("round trip changed the document: %s then %s", b, b2)
		}
	})
}
