package hcsemu

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// decodeDocument decodes an HCS JSON document into v (a pointer to a schema2 type) strictly, as
// HCS validates documents against its schema: malformed JSON, a field the schema does not have
// (names match exactly, as in the schema reference) or a value of the wrong JSON type fail
// with HCS_E_INVALID_JSON; a number that does not fit its field (negative, fractional or too
// large) fails with E_INVALIDARG. The message names the field by its path, for instance
// "Container.Storage.Pathx: unknown field". what names the document in messages.
func decodeDocument(doc string, v any, what string) error {
	if strings.TrimSpace(doc) == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s: the document is empty", what)
	}
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s: malformed JSON: %v", what, err)
	}
	if d.More() {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s: malformed JSON: data after the document", what)
	}
	if err := checkShape("", raw, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s: %v", what, err)
	}
	return nil
}

// decodeOptional is decodeDocument for documents HCS lets the caller omit (options, queries):
// an empty string leaves v as it is.
func decodeOptional(doc string, v any, what string) error {
	if strings.TrimSpace(doc) == "" {
		return nil
	}
	return decodeDocument(doc, v, what)
}

var (
	timeType       = reflect.TypeOf(time.Time{})
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
)

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// checkShape walks a decoded JSON value against the Go type it is to be decoded into.
func checkShape(p string, v any, t reflect.Type) error {
	name := p
	if name == "" {
		name = "the document"
	}
	if v == nil {
		return nil // null leaves a field unset, as HCS treats it
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrongType := func(want string) error {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s: expected %s, got %s", name, want, jsonKind(v))
	}
	switch {
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return wrongType("a date-time string")
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return errorf(computecore.HCS_E_INVALID_JSON, "%s: %q is not an RFC 3339 date-time", name, s)
		}
		return nil
	case t.Kind() == reflect.Interface, t == rawMessageType:
		return nil // free-form (Settings, HostedSystem, HCN policy settings): checked where it is used
	case t.Kind() == reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongType("an object")
		}
		fields := jsonFields(t)
		for k, fv := range obj {
			f, ok := fields[k]
			if !ok {
				return errorf(computecore.HCS_E_INVALID_JSON, "%s: unknown field", fieldPath(p, k))
			}
			if err := checkShape(fieldPath(p, k), fv, f.Type); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongType("an object")
		}
		for k, fv := range obj {
			if err := checkShape(fieldPath(p, k), fv, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		if _, ok := v.(string); !ok {
			return wrongType("a base64 string")
		}
		return nil
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return wrongType("an array")
		}
		if t.Kind() == reflect.Array && len(arr) > t.Len() {
			return errorf(computecore.E_INVALIDARG, "%s: %d elements, at most %d", name, len(arr), t.Len())
		}
		for i, e := range arr {
			if err := checkShape(fmt.Sprintf("%s[%d]", p, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.String:
		if _, ok := v.(string); !ok {
			return wrongType("a string")
		}
		return nil
	case t.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType("a boolean")
		}
		return nil
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType("a number")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return errorf(computecore.E_INVALIDARG, "%s: %s is not an integer in [%d, %d]", name, n,
				int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
		}
		return nil
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType("a number")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return errorf(computecore.E_INVALIDARG, "%s: %s is not an integer in [0, %d]", name, n,
				uint64(math.MaxUint64)>>(64-t.Bits()))
		}
		return nil
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return wrongType("a number")
		}
		return nil
	}
	return errorf(computecore.HCS_E_INVALID_JSON, "%s: cannot check a field of Go type %s", name, t)
}

// jsonFields maps a struct's JSON field names to its fields (embedded structs flattened).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					m[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	return m
}

// Limits the emulator checks on container resources. The ranges are those of the HCS schema
// reference (Processor.Maximum and Weight: 1–10000; 0 means unset).
const (
	maxProcessorMaximum = 10000
	maxProcessorWeight  = 10000
)

// ValidateComputeSystem decodes and checks a compute system document as HCS does before it
// creates anything. hostCPUs is the number of logical processors of the host; statPath checks
// that a host path exists (nil skips the checks of the file system).
func ValidateComputeSystem(doc string, hostCPUs int, statPath func(string) error) (*schema2.ComputeSystem, error) {
	return validateComputeSystem(doc, hostCPUs, statPath, statPath, nil)
}

// validateComputeSystem is ValidateComputeSystem for a client whose drive mapping is hp (nil:
// none): the document's host paths are resolved with it before they are checked. statPath
// checks the container's storage folder, statSource the host path of a mapped directory (which
// may be a single file).
func validateComputeSystem(doc string, hostCPUs int, statPath, statSource func(string) error, hp *hostPaths) (*schema2.ComputeSystem, error) {
	var cs schema2.ComputeSystem
	if err := decodeDocument(doc, &cs, "ComputeSystem"); err != nil {
		return nil, err
	}
	if cs.SchemaVersion == nil {
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "SchemaVersion: missing required field")
	}
	if cs.SchemaVersion.Major != 2 {
		return nil, errorf(computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION,
			"SchemaVersion: %d.%d is not supported (2.x is)", cs.SchemaVersion.Major, cs.SchemaVersion.Minor)
	}
	// HostedSystem, Container and VirtualMachine are mutually exclusive (VirtDocs ComputeSystem).
	n := 0
	for _, set := range []bool{cs.Container != nil, cs.VirtualMachine != nil, cs.HostedSystem != nil} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "Container, VirtualMachine, HostedSystem: only one of them may be set")
	case n == 0:
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "Container: missing required field (or VirtualMachine, or HostingSystemId and HostedSystem)")
	case cs.HostedSystem != nil && cs.HostingSystemId == "":
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "HostingSystemId: missing required field (HostedSystem needs the system hosting it)")
	case cs.HostingSystemId != "" && cs.HostedSystem == nil:
		// Assumption: the schema describes a hosted container only as HostedSystem (VirtDocs
		// ComputeSystem.HostingSystemId: "the system described by HostedSystem"); hcsshim
		// sends nothing else.
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem: missing required field (HostingSystemId %q names a host for it)", cs.HostingSystemId)
	}
	if err := hp.resolveComputeSystem(&cs); err != nil {
		return nil, err
	}
	if c := cs.Container; c != nil {
		if err := validateContainer(c, false, hostCPUs, statPath, statSource); err != nil {
			return nil, err
		}
	}
	if cs.VirtualMachine != nil {
		if err := validateVirtualMachine(&cs, hostCPUs); err != nil {
			return nil, err
		}
	}
	if cs.HostedSystem != nil {
		hs, err := decodeHostedSystem(cs.HostedSystem)
		if err != nil {
			return nil, err
		}
		// Guest paths are checked against the hosting VM (hosted_linux.go), not the host.
		if err := validateContainer(hs.Container, true, hostCPUs, nil, nil); err != nil {
			return nil, prefixField(err, "HostedSystem.")
		}
		cs.HostedSystem = hs
	}
	return &cs, nil
}

func validateContainer(c *schema2.Container, hosted bool, hostCPUs int, statPath, statSource func(string) error) error {
	if !hosted {
		// A process-isolated container runs on a volume the caller mounted: HCS needs its path.
		if c.Storage == nil {
			return errorf(computecore.HCS_E_INVALID_JSON, "Container.Storage: missing required field")
		}
		if c.Storage.Path == "" {
			return errorf(computecore.HCS_E_INVALID_JSON, "Container.Storage.Path: missing required field")
		}
		if statPath != nil {
			if err := statPath(c.Storage.Path); err != nil {
				return errorf(computecore.E_PATH_NOT_FOUND, "Container.Storage.Path: %q: %v", c.Storage.Path, err)
			}
		}
	}
	if n := c.Networking; n != nil && len(n.NetworkAdapters) > 0 {
		// Endpoints listed without a namespace (the v1 EndpointList way) join a namespace the
		// emulator makes for the container (hns.go systemNamespace).
		switch {
		case hosted:
			// A hosted container's network is its VM's NICs (VirtualMachine/Devices/
			// NetworkAdapters) in the namespace Container.Networking.Namespace names; hcsshim
			// never lists endpoints in a hosted container's document.
			return errorf(computecore.E_NOTIMPL, "Container.Networking.NetworkAdapters: %q: endpoints of a container in a utility VM are not emulated; add them to the VM as NICs and name their namespace in Container.Networking.Namespace", n.NetworkAdapters)
		case n.Namespace != "":
			// Assumption: with a namespace HCS takes the endpoints from it (hcsshim leaves the
			// adapters out then); a document with both is refused rather than guessed at.
			return errorf(computecore.E_INVALIDARG, "Container.Networking.NetworkAdapters: %q: give the endpoints either here or in the namespace Container.Networking.Namespace names, not both", n.NetworkAdapters)
		}
	}
	if err := ValidateProcessor("Container.Processor", c.Processor, hostCPUs); err != nil {
		return err
	}
	for i, md := range c.MappedDirectories {
		if err := ValidateMappedDirectory(fmt.Sprintf("Container.MappedDirectories[%d]", i), &md, statSource); err != nil {
			return err
		}
	}
	if !hosted {
		// A hosted container's pipes are its VM's, checked against the VM (hosted_linux.go).
		for i := range c.MappedPipes {
			if err := ValidateMappedPipe(fmt.Sprintf("Container.MappedPipes[%d]", i), &c.MappedPipes[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateProcessor checks processor limits: Count at most the host's logical processors (HCS
// refuses more for a process-isolated container; hcsshim clamps the count for that reason),
// Maximum and Weight within 0–10000.
func ValidateProcessor(field string, p *schema2.Processor, hostCPUs int) error {
	if p == nil {
		return nil
	}
	if hostCPUs > 0 && int64(p.Count) > int64(hostCPUs) {
		return errorf(computecore.E_INVALIDARG, "%s.Count: %d is more than the host's %d logical processors", field, p.Count, hostCPUs)
	}
	if p.Maximum > maxProcessorMaximum {
		return errorf(computecore.E_INVALIDARG, "%s.Maximum: %d is out of range (1-%d, hundredths of a percent)", field, p.Maximum, maxProcessorMaximum)
	}
	if p.Weight > maxProcessorWeight {
		return errorf(computecore.E_INVALIDARG, "%s.Weight: %d is out of range (1-%d)", field, p.Weight, maxProcessorWeight)
	}
	return nil
}

// ValidateMappedDirectory checks a mapped directory: a host path that statPath accepts (a
// folder or a single file) and a container path on C:.
func ValidateMappedDirectory(field string, md *schema2.MappedDirectory, statPath func(string) error) error {
	if md.HostPath == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s.HostPath: missing required field", field)
	}
	if md.ContainerPath == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s.ContainerPath: missing required field", field)
	}
	if _, ok := winToRel(md.ContainerPath); !ok {
		return errorf(computecore.E_INVALIDARG, "%s.ContainerPath: %q is not an absolute path on C:", field, md.ContainerPath)
	}
	if statPath != nil {
		if err := statPath(md.HostPath); err != nil {
			return errorf(computecore.E_PATH_NOT_FOUND, "%s.HostPath: %q: %v", field, md.HostPath, err)
		}
	}
	return nil
}

// ValidateMappedPipe checks a mapped pipe of a process-isolated container: a host pipe path
// (\\.\pipe\NAME) and a container pipe name that is one path element.
func ValidateMappedPipe(field string, mp *schema2.MappedPipe) error {
	if mp.ContainerPipeName == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s.ContainerPipeName: missing required field", field)
	}
	if mp.HostPath == "" {
		return errorf(computecore.HCS_E_INVALID_JSON, "%s.HostPath: missing required field", field)
	}
	if name, ok := strings.CutPrefix(strings.ToLower(mp.HostPath), `\\.\pipe\`); !ok || name == "" {
		return errorf(computecore.E_INVALIDARG, "%s.HostPath: %q is not a host pipe path (\\\\.\\pipe\\<name>)", field, mp.HostPath)
	}
	// Assumption: Windows allows any character but a backslash in a pipe name's components;
	// the emulator keeps the name one file name so that its socket stays in its folder.
	if n := mp.ContainerPipeName; strings.ContainsAny(n, `\/`) || n == "." || n == ".." || len(n) > 200 {
		return errorf(computecore.E_INVALIDARG, "%s.ContainerPipeName: %q: the emulator maps a pipe name without \\ or / (at most 200 characters)", field, n)
	}
	return nil
}

// ValidateProcessParameters decodes and checks a process document: there must be something to
// run, and the console size fields must make sense.
func ValidateProcessParameters(doc string) (*schema2.ProcessParameters, error) {
	var p schema2.ProcessParameters
	if err := decodeDocument(doc, &p, "ProcessParameters"); err != nil {
		return nil, err
	}
	if p.CommandLine == "" && p.ApplicationName == "" && len(p.CommandArgs) == 0 {
		return nil, errorf(computecore.HCS_E_INVALID_JSON, "CommandLine: missing required field")
	}
	return &p, nil
}

// reflectType is reflect.TypeOf, for files that do not import reflect.
func reflectType(v any) reflect.Type { return reflect.TypeOf(v) }
