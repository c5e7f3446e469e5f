package oci

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Owner is the owner HCS records for the compute systems this shim creates (hcsshim names
// the shim binary the same way), so tools can tell whose systems they are.
const Owner = "containerd-shim-runhcs-v1"

// pipePrefix starts the path of a Windows named pipe.
const pipePrefix = `\\.\pipe\`

// ErrNoWindowsSection is returned for a spec without a windows section.
var ErrNoWindowsSection = fmt.Errorf("runhcs runs Windows containers: spec has no windows section: %w", errdefs.ErrInvalidArgument)

// ContainerDocument builds the HCS document of a process-isolated Windows container from its
// spec (the caller chose process isolation: ResolveIsolation). storagePath is the volume the container's layers are mounted at; parents are its
// read-only layer folders, nearest first. A linux section (which ctr adds beside windows
// when run with --platform windows/amd64 on a Linux host) is ignored.
func ContainerDocument(s *specs.Spec, storagePath string, parents []string) (*schema2.ComputeSystem, error) {
	if s == nil {
		return nil, fmt.Errorf("spec: missing: %w", errdefs.ErrInvalidArgument)
	}
	if s.Windows == nil {
		return nil, ErrNoWindowsSection
	}
	if storagePath == "" {
		return nil, fmt.Errorf("root: no storage path (layers not mounted): %w", errdefs.ErrInvalidArgument)
	}
	c := &schema2.Container{
		Storage: &schema2.Storage{Path: storagePath},
	}
	if s.Hostname != "" {
		c.GuestOs = &schema2.GuestOs{HostName: s.Hostname}
	}
	for i, p := range parents {
		if p == "" {
			return nil, fmt.Errorf("layer %d: empty path: %w", i, errdefs.ErrInvalidArgument)
		}
		c.Storage.Layers = append(c.Storage.Layers, schema2.Layer{Id: layerID(p), Path: p})
	}
	if err := mounts(c, s.Mounts); err != nil {
		return nil, err
	}
	res, err := WindowsResources(s.Windows.Resources, s.Annotations)
	if err != nil {
		return nil, err
	}
	c.Processor, c.Memory = res.Processor, res.Memory
	c.Storage.QoS = res.QoS
	if n := s.Windows.Network; n != nil {
		// HNS names namespaces and endpoints by GUID; anything else would fail in HCS or HNS
		// after the layers were mounted.
		if n.NetworkNamespace != "" {
			if _, err := computenetwork.ParseGUID(n.NetworkNamespace); err != nil {
				return nil, fmt.Errorf("windows.network.networkNamespace=%q: not an HNS namespace id (a GUID): %w", n.NetworkNamespace, errdefs.ErrInvalidArgument)
			}
		}
		for i, ep := range n.EndpointList {
			if _, err := computenetwork.ParseGUID(ep); err != nil && n.NetworkNamespace == "" {
				return nil, fmt.Errorf("windows.network.endpointList[%d]=%q: not an HNS endpoint id (a GUID): %w", i, ep, errdefs.ErrInvalidArgument)
			}
		}
		net := &schema2.Networking{
			AllowUnqualifiedDnsQuery:   n.AllowUnqualifiedDNSQuery,
			DnsSearchList:              strings.Join(n.DNSSearchList, ","),
			NetworkSharedContainerName: n.NetworkSharedContainerName,
			Namespace:                  n.NetworkNamespace,
		}
		// With a namespace HCS takes the endpoints from it (hcsshim leaves the adapters out
		// then). Without one, the shim puts the endpoints in a namespace of its own and names
		// that instead (internal/shim/network.go), as hcsshim does; the document carries them
		// as adapters until then.
		if n.NetworkNamespace == "" {
			net.NetworkAdapters = n.EndpointList
		}
		if net.AllowUnqualifiedDnsQuery || net.DnsSearchList != "" || net.NetworkSharedContainerName != "" ||
			net.Namespace != "" || len(net.NetworkAdapters) > 0 {
			c.Networking = net
		}
	}
	for i, d := range s.Windows.Devices {
		if d.IDType != "class" && d.IDType != "vpci-instance-id" {
			return nil, fmt.Errorf("windows.devices[%d].idType=%q: want \"class\" or \"vpci-instance-id\": %w", i, d.IDType, errdefs.ErrInvalidArgument)
		}
		dev := schema2.Device{Type: "DeviceInstance", IdType: d.IDType, LocationPath: d.ID}
		if d.IDType == "class" {
			dev = schema2.Device{Type: "ClassGuid", InterfaceClassGuid: d.ID}
		}
		c.AssignedDevices = append(c.AssignedDevices, dev)
	}
	if _, err := CredentialSpec(s); err != nil {
		return nil, err
	}
	// ShouldTerminateOnLastHandleClosed as hcsshim sets it for every WCOW container
	// (internal/hcsoci/hcsdoc_wcow.go createWindowsContainerDocument): the shim holds its
	// handle from create to delete, so HCS ends the container when the shim goes, even if the
	// shim's own terminate never came back (a stuck HCS outliving the shim's delete action,
	// which the soak suite found to leak the system otherwise).
	return &schema2.ComputeSystem{
		Owner:                             Owner,
		SchemaVersion:                     &schema2.SchemaV21,
		Container:                         c,
		ShouldTerminateOnLastHandleClosed: true,
	}, nil
}

// mounts translates spec mounts: a source that is a named pipe becomes a MappedPipe, anything
// else (a directory, or a single file) a MappedDirectory, read-only with the "ro" option.
func mounts(c *schema2.Container, ms []specs.Mount) error {
	for i, m := range ms {
		switch m.Type {
		case "", "bind":
		default:
			return fmt.Errorf("mounts[%d].type=%q: only bind mounts (empty type or \"bind\") are supported for Windows containers: %w", i, m.Type, errdefs.ErrInvalidArgument)
		}
		if m.Source == "" {
			return fmt.Errorf("mounts[%d].source: empty: %w", i, errdefs.ErrInvalidArgument)
		}
		if m.Destination == "" {
			return fmt.Errorf("mounts[%d].destination: empty: %w", i, errdefs.ErrInvalidArgument)
		}
		ro := false
		for _, o := range m.Options {
			switch o {
			case "ro":
				ro = true
			case "rw":
				ro = false
			}
		}
		if strings.HasPrefix(strings.ToLower(m.Source), pipePrefix) {
			name := m.Destination
			if strings.HasPrefix(strings.ToLower(name), pipePrefix) {
				name = name[len(pipePrefix):]
			}
			if name == "" {
				return fmt.Errorf("mounts[%d].destination=%q: no pipe name: %w", i, m.Destination, errdefs.ErrInvalidArgument)
			}
			c.MappedPipes = append(c.MappedPipes, schema2.MappedPipe{ContainerPipeName: name, HostPath: m.Source})
			continue
		}
		c.MappedDirectories = append(c.MappedDirectories, schema2.MappedDirectory{
			HostPath:      m.Source,
			ContainerPath: m.Destination,
			ReadOnly:      ro,
		})
	}
	return nil
}

// CredentialSpec returns the spec's gMSA credential spec as JSON ("" if none), checked field by
// field (schema2.ParseCredentialSpec). containerd's CRI puts it there as a JSON string
// (WithWindowsCredentialSpec); an object is accepted too. The shim gives it to HCS as a Container
// Credential Guard instance (internal/shim), which the container document then names.
func CredentialSpec(s *specs.Spec) (string, error) {
	if s.Windows == nil || s.Windows.CredentialSpec == nil {
		return "", nil
	}
	var raw []byte
	switch v := s.Windows.CredentialSpec.(type) {
	case string:
		raw = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("windows.credentialSpec: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		raw = b
	}
	if _, err := schema2.ParseCredentialSpec("windows.credentialSpec", string(raw)); err != nil {
		return "", fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
	}
	return string(raw), nil
}

// layerID derives a stable GUID for a layer folder from its name. On Windows HCS's
// NameToGuid (vmcompute.dll) would supply it; the document only needs the id to be stable
// and distinct per layer, which a name-based (version 5 style) UUID of the folder name is.
// LayerID is the id of the layer folder path, as the container document names it.
func LayerID(path string) string { return layerID(path) }

func layerID(path string) string {
	name := path
	if i := strings.LastIndexAny(strings.TrimRight(path, `/\`), `/\`); i >= 0 {
		name = strings.TrimRight(path, `/\`)[i+1:]
	}
	h := sha1.Sum([]byte(name))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
