package compute

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Hosted containers: HcsCreateComputeSystem with HostingSystemId and HostedSystem. The container
// is made of what its VM has: combined layers at Storage.Path, VSMB shares for its layers and
// mapped directories, mapped pipes. Its processes run in the VM's namespaces and in a cgroup
// nested in the VM's, so the VM's limits bound it. See docs/emulator.md for the contract.

// hostedLink is a hosted container's tie to its VM; set at create, read under the container's
// lock.
type hostedLink struct {
	vm    *system
	ns    *vmNamespaces // the VM's namespaces, for the spawner
	netns string        // the VM's network namespace file (vm_network_linux.go)
	cpus  int           // the VM's processors: the "host" of the container's limits
	left  bool          // deregistered from the VM
	// vmExit is the exit type of the VM once it has stopped (set under the VM's lock, so
	// atomically): the container's processes die with it, and the container exits as it did.
	vmExit atomic.Value // schema2.NotificationType
}

// siloExitTypeLocked is how a container whose last process has exited stops: gracefully, or as
// its VM did when that is why its processes are gone.
func (s *system) siloExitTypeLocked() schema2.NotificationType {
	if s.hosted != nil {
		if t, ok := s.hosted.vmExit.Load().(schema2.NotificationType); ok {
			return t
		}
	}
	return schema2.NotificationGracefulExit
}

// setupHostedLocked checks a hosted container against its VM and ties it to it, then sets it up
// as a container whose C:\ is its combined layers.
func (s *system) setupHostedLocked(ctx context.Context) error {
	hs := s.doc.HostedSystem.(*schema2.HostedSystem)
	c := *hs.Container
	vmSys, err := s.e.lookup(wire.SystemRef{ID: s.doc.HostingSystemId})
	if err != nil {
		return hresult.Errorf(computecore.HCS_E_SYSTEM_NOT_FOUND, "HostingSystemId: %q: no such compute system", s.doc.HostingSystemId)
	}
	link, volPath, err := s.attachToVM(vmSys, &c)
	vmSys.mu.Unlock()
	if err != nil {
		return err
	}
	s.hosted, s.volPath = link, volPath
	s.doc.Container = &c
	// Its processes run in the VM's network stack; c names no HNS namespace to join any more
	// (hostedNetwork).
	if s.netns, err = os.Open(link.netns); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "compute system %q: the network namespace of VM %q: %v", s.id, s.doc.HostingSystemId, err)
	}
	return s.setupContainerLocked(ctx)
}

// attachToVM does the checks that need the VM (locked) and registers the container with it.
// It translates c's guest paths into host paths.
func (s *system) attachToVM(vmSys *system, c *schema2.Container) (*hostedLink, string, error) {
	vm := vmSys.vm
	switch {
	case vm == nil:
		return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "HostingSystemId: %q is not a utility VM", vmSys.id)
	case !allowed(vmSys.state, opHost):
		return nil, "", hresult.Errorf(computecore.HCS_E_INVALID_STATE, "HostingSystemId: VM %q is %s, not Running", vmSys.id, vmSys.state)
	case !vm.connected:
		// Containers in a VM are made by its guest service (microsoft/hcsshim#1327).
		return nil, "", hresult.Errorf(computecore.E_NOT_SUPPORTED, "HostingSystemId: VM %q has no guest connection (VirtualMachine.GuestConnection)", vmSys.id)
	}
	const f = "HostedSystem.Container"
	ref := &hostedRef{}
	_, key, err := vm.guestPath(f+".Storage.Path", c.Storage.Path)
	if err != nil {
		return nil, "", err
	}
	cl := vm.layers[key]
	if cl == nil {
		return nil, "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s.Storage.Path: %q: no CombinedLayers were applied there in VM %q", f, c.Storage.Path, vmSys.id)
	}
	ref.layers = key
	ref.shares = append(ref.shares, cl.shares...)
	base := ""
	for i, l := range c.Storage.Layers {
		name, host, _, err := vm.vsmbPath(fmt.Sprintf("%s.Storage.Layers[%d].Path", f, i), l.Path)
		if err != nil {
			return nil, "", err
		}
		ref.shares = append(ref.shares, name)
		base = host
	}
	if base == "" && len(cl.shares) > 0 {
		base = vm.shares[cl.shares[len(cl.shares)-1]].share.Path
	}
	if base != "" && vm.hasBuild {
		b, ok, err := readOSBuild(base + "/Files")
		if err != nil {
			return nil, "", err
		}
		if ok && b.Build > vm.build.Build {
			return nil, "", hresult.Errorf(computecore.HCS_E_IMAGE_MISMATCH, "%s.Storage.Layers: the image's build %s is newer than VM %q's (%s)", f, b.Version, vmSys.id, vm.build.Version)
		}
	}
	if st := c.ContainerCredentialGuard; st != nil {
		// The container reaches its instance over HvSocket only if the VM's service table
		// allows that instance's service (hcsshim hcsoci/resources_wcow.go: "By default
		// HVSocket won't allow something inside the VM to connect back to a process on the
		// host"). Assumption: HCS checks this at create and refuses with E_INVALIDARG; on
		// Windows a container created without it would fail its domain logons instead.
		field := f + ".ContainerCredentialGuard"
		id, service, err := s.e.ccg.resolve(field, st, true)
		if err != nil {
			return nil, "", err
		}
		if svc, ok := vm.hvServices[service]; !ok || svc.Disabled {
			return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "%s: RpcEndpoint=%q: the instance's HvSocket service %s is not in VM %q's service table (or is disabled): add it at %s first", field, st.RpcEndpoint, service, vmSys.id, fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, service))
		}
		ref.services = append(ref.services, service)
		s.identity = id
	}
	netns, err := vm.hostedNetwork(vmSys.id, c)
	if err != nil {
		return nil, "", err
	}
	if c.Processor != nil && c.Processor.Count > vm.count {
		return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "%s.Processor.Count: %d is more than VM %q's %d processors", f, c.Processor.Count, vmSys.id, vm.count)
	}
	shares, err := translateMappedDirectories(vm, c, f)
	if err != nil {
		return nil, "", err
	}
	ref.shares = append(ref.shares, shares...)
	for i, mp := range c.MappedPipes {
		field := fmt.Sprintf("%s.MappedPipes[%d].HostPath", f, i)
		prefix := strings.ToLower(schema2.VSMBGuestPipePath(""))
		name, ok := strings.CutPrefix(strings.ToLower(mp.HostPath), prefix)
		if !ok || name == "" {
			return nil, "", hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is not a mapped pipe of the VM (%s<name>)", field, mp.HostPath, schema2.VSMBGuestPipePath(""))
		}
		hostPipe, ok := vm.pipes[`\\.\pipe\`+name]
		if !ok {
			return nil, "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: %q: no pipe \\\\.\\pipe\\%s is mapped into VM %q", field, mp.HostPath, name, vmSys.id)
		}
		// The container reaches the host pipe the VM was given (pipes_linux.go): the VM's
		// share of it is what HCS would go through.
		c.MappedPipes[i].HostPath = hostPipe
		if err := ValidateMappedPipe(fmt.Sprintf("%s.MappedPipes[%d]", f, i), &c.MappedPipes[i]); err != nil {
			return nil, "", err
		}
		ref.pipes = append(ref.pipes, `\\.\pipe\`+name)
	}
	cg, err := s.e.cg.createNested(vmSys.cg, s.id)
	if err != nil {
		return nil, "", hresult.Errorf(computecore.E_FAIL, "compute system %q: %v", s.id, err)
	}
	s.cg = cg
	vm.hosted[s.id] = ref
	vm.sys[s.id] = s
	return &hostedLink{vm: vmSys, ns: vm.ns, netns: netns, cpus: int(vm.count)}, cl.target, nil
}

// mapHostedLocked maps a directory into a running hosted container (a modify at
// Container/MappedDirectories): its HostPath is translated as at create (attachToVM), and the
// share it names is then in use by the container.
func (s *system) mapHostedLocked(md schema2.MappedDirectory) error {
	if md.HostPath == "" || md.ContainerPath == "" {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings.HostPath, Settings.ContainerPath: missing required field")
	}
	vmSys := s.hosted.vm
	vmSys.mu.Lock()
	vm := vmSys.vm
	ref := vm.hosted[s.id]
	if ref == nil || !allowed(vmSys.state, opHost) {
		vmSys.mu.Unlock()
		return hresult.Errorf(computecore.HCS_E_INVALID_STATE, "container %q: its VM %q is not running", s.id, vmSys.id)
	}
	c := schema2.Container{MappedDirectories: []schema2.MappedDirectory{md}}
	shares, err := translateMappedDirectories(vm, &c, "Settings")
	if err == nil {
		ref.shares = append(ref.shares, shares...)
	}
	vmSys.mu.Unlock()
	if err != nil {
		return err
	}
	return s.mapLocked(c.MappedDirectories[0])
}

// translateMappedDirectories turns the HostPaths of c's mapped directories, paths of the VM
// (VSMB share paths or guest paths), into host paths, and returns the shares they use.
func translateMappedDirectories(vm *vmState, c *schema2.Container, f string) ([]string, error) {
	var shares []string
	mds := slices.Clone(c.MappedDirectories)
	for i := range mds {
		field := fmt.Sprintf("%s.MappedDirectories[%d].HostPath", f, i)
		md := &mds[i]
		if strings.HasPrefix(strings.ToLower(md.HostPath), strings.ToLower(schema2.VSMBGuestPathPrefix)) {
			name, host, share, err := vm.vsmbPath(field, md.HostPath)
			if err != nil {
				return nil, err
			}
			fi, err := os.Stat(host)
			if err != nil {
				return nil, hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: %q: %v", field, md.HostPath, err)
			}
			o := share.share.Options
			if o == nil {
				o = &schema2.VirtualSmbShareOptions{}
			}
			switch {
			case o.RestrictFileAccess && (fi.IsDir() || filepath.Dir(host) != filepath.Clean(share.share.Path) || !slices.Contains(share.share.AllowedFiles, filepath.Base(host))):
				// A restricted share serves only its AllowedFiles (VirtDocs VirtualSmbShareOptions).
				return nil, hresult.Errorf(computecore.E_ACCESSDENIED, "%s: %q: the share %q allows only its AllowedFiles %q", field, md.HostPath, name, share.share.AllowedFiles)
			case !fi.IsDir() && !fi.Mode().IsRegular():
				return nil, hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is neither a folder nor a file", field, md.HostPath)
			}
			md.ReadOnly = md.ReadOnly || o.ReadOnly
			shares = append(shares, name)
			md.HostPath = host
			continue
		}
		host, _, err := vm.guestPath(field, md.HostPath)
		if err != nil {
			return nil, err
		}
		md.HostPath = host
	}
	c.MappedDirectories = mds
	return shares, nil
}

// leaveHostLocked deregisters a hosted container from its VM (once), so that what it used may
// be removed.
func (s *system) leaveHostLocked() {
	h := s.hosted
	if h == nil || h.left {
		return
	}
	h.left = true
	h.vm.mu.Lock()
	if vm := h.vm.vm; vm != nil && vm.sys[s.id] == s {
		delete(vm.hosted, s.id)
		delete(vm.sys, s.id)
	}
	h.vm.mu.Unlock()
}

// vmNamespacesLocked is where the system's processes start: its VM's namespaces, or nil.
func (s *system) vmNamespacesLocked() *vmNamespaces {
	switch {
	case s.vm != nil:
		return s.vm.ns
	case s.hosted != nil:
		return s.hosted.ns
	}
	return nil
}

// cpusLocked is the processor count a container's limits are relative to: its VM's, or the host's.
func (s *system) cpusLocked() int {
	if s.hosted != nil {
		return s.hosted.cpus
	}
	return s.e.hostCPUs
}

// checkProcessIsolatedBuildLocked refuses a process-isolated container whose image build is not
// the host's: "The operating system of the container does not match the operating system of
// the host" (HCS_E_IMAGE_MISMATCH, VirtDocs version-compatibility).
func (s *system) checkProcessIsolatedBuildLocked() error {
	if s.volPath == "" {
		return nil
	}
	b, ok, err := readOSBuild(s.volPath)
	if err != nil || !ok {
		return err
	}
	host, _ := parseOSBuild(s.e.cfg.OSVersion)
	if !processIsolationRuns(host, b) {
		// Windows says "The operating system of the container does not match the operating
		// system of the host. (0xc0370101)" (reported by users; docs/notes/hyperv.md §4) and names
		// no build; the emulator adds both.
		return hresult.Errorf(computecore.HCS_E_IMAGE_MISMATCH, "Container.Storage.Path: the operating system of the container (build %s) does not match the operating system of the host (build %s)", b.Version, host.Version)
	}
	return nil
}

// processorTopology is the service property ProcessorTopology: the emulated host's processors.
func (e *Engine) processorTopology() schema2.ProcessorTopology {
	t := schema2.ProcessorTopology{LogicalProcessorCount: uint32(e.hostCPUs)}
	for i := 0; i < e.hostCPUs; i++ {
		t.LogicalProcessors = append(t.LogicalProcessors, schema2.LogicalProcessor{LpIndex: uint32(i), CoreId: uint32(i)})
	}
	return t
}
