package compute

import (
	"fmt"
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

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
	if err := hresult.Decode(doc, &cs, "ComputeSystem"); err != nil {
		return nil, err
	}
	if cs.SchemaVersion == nil {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "SchemaVersion: missing required field")
	}
	if cs.SchemaVersion.Major != 2 {
		return nil, hresult.Errorf(computecore.HCS_E_UNSUPPORTED_PROTOCOL_VERSION,
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
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Container, VirtualMachine, HostedSystem: only one of them may be set")
	case n == 0:
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Container: missing required field (or VirtualMachine, or HostingSystemId and HostedSystem)")
	case cs.HostedSystem != nil && cs.HostingSystemId == "":
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostingSystemId: missing required field (HostedSystem needs the system hosting it)")
	case cs.HostingSystemId != "" && cs.HostedSystem == nil:
		// Assumption: the schema describes a hosted container only as HostedSystem (VirtDocs
		// ComputeSystem.HostingSystemId: "the system described by HostedSystem"); hcsshim
		// sends nothing else.
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "HostedSystem: missing required field (HostingSystemId %q names a host for it)", cs.HostingSystemId)
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
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Container.Storage: missing required field")
		}
		if c.Storage.Path == "" {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Container.Storage.Path: missing required field")
		}
		if statPath != nil {
			if err := statPath(c.Storage.Path); err != nil {
				return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "Container.Storage.Path: %q: %v", c.Storage.Path, err)
			}
		}
	}
	if n := c.Networking; n != nil && len(n.NetworkAdapters) > 0 {
		// Endpoints listed without a namespace (the v1 EndpointList way) join a namespace the
		// emulator makes for the container (internal/hcsemu/hns SystemNamespace).
		switch {
		case hosted:
			// A hosted container's network is its VM's NICs (VirtualMachine/Devices/
			// NetworkAdapters) in the namespace Container.Networking.Namespace names; hcsshim
			// never lists endpoints in a hosted container's document.
			return hresult.Errorf(computecore.E_NOTIMPL, "Container.Networking.NetworkAdapters: %q: endpoints of a container in a utility VM are not emulated; add them to the VM as NICs and name their namespace in Container.Networking.Namespace", n.NetworkAdapters)
		case n.Namespace != "":
			// Assumption: with a namespace HCS takes the endpoints from it (hcsshim leaves the
			// adapters out then); a document with both is refused rather than guessed at.
			return hresult.Errorf(computecore.E_INVALIDARG, "Container.Networking.NetworkAdapters: %q: give the endpoints either here or in the namespace Container.Networking.Namespace names, not both", n.NetworkAdapters)
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
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Count: %d is more than the host's %d logical processors", field, p.Count, hostCPUs)
	}
	if p.Maximum > maxProcessorMaximum {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Maximum: %d is out of range (1-%d, hundredths of a percent)", field, p.Maximum, maxProcessorMaximum)
	}
	if p.Weight > maxProcessorWeight {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Weight: %d is out of range (1-%d)", field, p.Weight, maxProcessorWeight)
	}
	return nil
}

// ValidateMappedDirectory checks a mapped directory: a host path that statPath accepts (a
// folder or a single file) and a container path on C:.
func ValidateMappedDirectory(field string, md *schema2.MappedDirectory, statPath func(string) error) error {
	if md.HostPath == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.HostPath: missing required field", field)
	}
	if md.ContainerPath == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.ContainerPath: missing required field", field)
	}
	if _, ok := winToRel(md.ContainerPath); !ok {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.ContainerPath: %q is not an absolute path on C:", field, md.ContainerPath)
	}
	if statPath != nil {
		if err := statPath(md.HostPath); err != nil {
			return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s.HostPath: %q: %v", field, md.HostPath, err)
		}
	}
	return nil
}

// ValidateMappedPipe checks a mapped pipe of a process-isolated container: a host pipe path
// (\\.\pipe\NAME) and a container pipe name that is one path element.
func ValidateMappedPipe(field string, mp *schema2.MappedPipe) error {
	if mp.ContainerPipeName == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.ContainerPipeName: missing required field", field)
	}
	if mp.HostPath == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.HostPath: missing required field", field)
	}
	if name, ok := strings.CutPrefix(strings.ToLower(mp.HostPath), `\\.\pipe\`); !ok || name == "" {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.HostPath: %q is not a host pipe path (\\\\.\\pipe\\<name>)", field, mp.HostPath)
	}
	// Assumption: Windows allows any character but a backslash in a pipe name's components;
	// the emulator keeps the name one file name so that its socket stays in its folder.
	if n := mp.ContainerPipeName; strings.ContainsAny(n, `\/`) || n == "." || n == ".." || len(n) > 200 {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.ContainerPipeName: %q: the emulator maps a pipe name without \\ or / (at most 200 characters)", field, n)
	}
	return nil
}

// ValidateProcessParameters decodes and checks a process document: there must be something to
// run, and the console size fields must make sense.
func ValidateProcessParameters(doc string) (*schema2.ProcessParameters, error) {
	var p schema2.ProcessParameters
	if err := hresult.Decode(doc, &p, "ProcessParameters"); err != nil {
		return nil, err
	}
	if p.CommandLine == "" && p.ApplicationName == "" && len(p.CommandArgs) == 0 {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "CommandLine: missing required field")
	}
	return &p, nil
}
