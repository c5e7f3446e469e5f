package compute

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
)

// Utility VMs: the lifecycle of a compute system of type VirtualMachine. The contract is in
// docs/emulator.md ("Utility VMs"); modify requests are in vm_modify_linux.go, hosted containers in
// hosted_linux.go. Lock order: a hosted container's lock may be held while its VM's is taken,
// never the other way round (a VM that stops ends its hosted containers from a goroutine).

// vmHost is the emulated host's budget for utility VMs and the daemon's VM folder.
type vmHost struct {
	memMB uint64 // --host-memory-mb
	dir   string // <root>/vms, a shared mount once a VM runs

	mu       sync.Mutex
	usedMB   uint64 // SizeInMB of the running VMs
	dirReady bool
}

// hostMemoryMB is this machine's memory, the default budget.
func hostMemoryMB() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit) >> 20
}

func newVMHost(cfg Config) *vmHost {
	h := &vmHost{memMB: cfg.HostMemoryMB, dir: layout.VMsDir(cfg.Root)}
	if h.memMB == 0 {
		h.memMB = hostMemoryMB()
	}
	// What a dead daemon of this root left mounted for its VMs goes now (their inits died with
	// it), not only when the next VM starts.
	h.detachLeftovers()
	return h
}

// detachLeftovers detaches whatever is mounted at the VM folder (lazily, the whole tree), then
// removes the folder, which is then plain files.
func (h *vmHost) detachLeftovers() {
	for unix.Unmount(h.dir, unix.MNT_DETACH) == nil {
	}
	os.RemoveAll(h.dir)
}

// charge takes mb from the budget, or fails as a host without that much memory would.
func (h *vmHost) charge(id string, mb uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.usedMB+mb > h.memMB {
		// Assumption: Hyper-V's "not enough memory in the system to start the virtual
		// machine" surfaces as E_OUTOFMEMORY (0x8007000E); HCS documents no code for it.
		return hresult.Errorf(computecore.E_OUTOFMEMORY, "start of VM %q: VirtualMachine.ComputeTopology.Memory.SizeInMB: %d MB does not fit in the host's %d MB (%d MB used by running VMs)",
			id, mb, h.memMB, h.usedMB)
	}
	h.usedMB += mb
	return nil
}

func (h *vmHost) release(mb uint64) {
	h.mu.Lock()
	h.usedMB -= min(mb, h.usedMB)
	h.mu.Unlock()
}

// prepareDir makes <root>/vms a shared mount, so that what the daemon mounts below it
// propagates into the VMs' mount namespaces (slaves of it, vminit_linux.go). What a dead daemon
// left mounted there is detached first.
func (h *vmHost) prepareDir() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dirReady {
		return nil
	}
	h.detachLeftovers()
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(h.dir, h.dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", h.dir, err)
	}
	if err := unix.Mount("", h.dir, "", unix.MS_SHARED, ""); err != nil {
		_ = unix.Unmount(h.dir, unix.MNT_DETACH)
		return fmt.Errorf("make %s shared: %w", h.dir, err)
	}
	h.dirReady = true
	return nil
}

// close detaches the VM folder (and whatever is still mounted below it).
func (h *vmHost) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dirReady {
		_ = unix.Unmount(h.dir, unix.MNT_DETACH)
		os.RemoveAll(h.dir)
		h.dirReady = false
	}
}

// vmState is the utility-VM part of a system (system.vm), guarded by the system's lock.
type vmState struct {
	memMB         uint64
	count         uint32
	limit, weight uint64
	guest         bool // the document has GuestConnection
	connected     bool
	charged       uint64 // MB taken from the host budget while running
	build         osBuild
	hasBuild      bool

	dir  string // <root>/vms/<group>: upper/, work/ and root/
	root string // dir/root: the guest's C:\, mounted while running

	init     *os.Process
	initDone chan struct{} // closed when the init is reaped
	ns       *vmNamespaces
	net      *vmNetwork // from create to stop (vm_network_linux.go)

	shares map[string]*vsmbShare          // by lower-cased name
	scsi   map[string]map[uint8]*scsiDisk // by controller key, then LUN
	pipes  map[string]string              // lower-cased host pipe path → as given
	// hvServices is the HvSocket service table, by lower-cased service GUID: the document's,
	// then as modifies change it (vm_modify_linux.go).
	hvServices map[string]schema2.HvSocketServiceConfig
	mounts     map[string]*guestMount     // MappedVirtualDisk, by lower-cased guest path
	layers     map[string]*combinedLayers // CombinedLayers, by lower-cased guest path
	dirs       map[string]*guestDir       // guest MappedDirectory, by lower-cased guest path
	hosted     map[string]*hostedRef      // live hosted containers, by id
	sys        map[string]*system         // the same, their systems (to end them)
}

type vsmbShare struct {
	share schema2.VirtualSmbShare
}

type scsiDisk struct {
	att       schema2.Attachment
	mountedAt string // guest path key of its MappedVirtualDisk, "" if not mounted
}

type guestMount struct {
	guestPath string
	ctrl      string
	lun       uint8
	target    string // host path under the VM's root
	fs        string // the disk's file system folder (<disk>.fs)
}

type combinedLayers struct {
	guestPath string
	target    string
	shares    []string // lower-cased share names of its layers
}

type guestDir struct {
	md     schema2.MappedDirectory
	target string
	share  string
}

// hostedRef is what a hosted container uses of its VM: removing any of it is ERROR_BUSY.
type hostedRef struct {
	shares []string // lower-cased share names (layers and mapped directories)
	layers string   // guest path key of its combined layers
	pipes  []string
	// services are the HvSocket services it uses (its Container Credential Guard instance's).
	services []string
}

func (vm *vmState) usesShare(name string) (string, bool) {
	for id, h := range vm.hosted {
		for _, s := range h.shares {
			if s == name {
				return id, true
			}
		}
	}
	for _, cl := range vm.layers {
		for _, s := range cl.shares {
			if s == name {
				return cl.guestPath, true
			}
		}
	}
	for _, d := range vm.dirs {
		if d.share == name {
			return d.md.ContainerPath, true
		}
	}
	return "", false
}

// newVMState builds the VM's state from its validated document.
func newVMState(e *Engine, id string, vm *schema2.VirtualMachine) *vmState {
	st := &vmState{
		memMB:  vm.ComputeTopology.Memory.SizeInMB,
		count:  vm.ComputeTopology.Processor.Count,
		limit:  vm.ComputeTopology.Processor.Limit,
		weight: vm.ComputeTopology.Processor.Weight,
		guest:  vm.GuestConnection != nil,
		dir:    filepath.Join(e.vmHost.dir, groupName(id)),
		shares: map[string]*vsmbShare{}, scsi: map[string]map[uint8]*scsiDisk{}, pipes: map[string]string{},
		mounts: map[string]*guestMount{}, layers: map[string]*combinedLayers{}, dirs: map[string]*guestDir{},
		hosted: map[string]*hostedRef{}, sys: map[string]*system{}, hvServices: map[string]schema2.HvSocketServiceConfig{},
	}
	if hv := vm.Devices.HvSocket; hv != nil && hv.HvSocketConfig != nil {
		for id, svc := range hv.HvSocketConfig.ServiceTable {
			st.hvServices[strings.ToLower(id)] = svc
		}
	}
	st.root = filepath.Join(st.dir, "root")
	for _, sh := range vm.Devices.VirtualSmb.Shares {
		st.shares[strings.ToLower(sh.Name)] = &vsmbShare{share: sh}
	}
	for ctrl, c := range vm.Devices.Scsi {
		st.scsi[ctrl] = map[uint8]*scsiDisk{}
		for l, a := range c.Attachments {
			lun, _ := parseLUN(l)
			st.scsi[ctrl][lun] = &scsiDisk{att: a}
		}
	}
	return st
}

// checkShareHost checks a share's host folder (and allowed files) on this machine.
func checkShareHost(field string, sh *schema2.VirtualSmbShare) error {
	if err := statDir(sh.Path); err != nil {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s.Path: %q: %v", field, sh.Path, err)
	}
	for i, f := range sh.AllowedFiles {
		if _, err := os.Stat(filepath.Join(sh.Path, f)); err != nil {
			return hresult.Errorf(computecore.E_FILE_NOT_FOUND, "%s.AllowedFiles[%d]: %q: %v", field, i, f, err)
		}
	}
	return nil
}

// checkAttachmentHost checks a SCSI attachment's file: an emulated VHDX for VirtualDisk, any
// existing file for PassThru.
func checkAttachmentHost(field string, a *schema2.Attachment) error {
	if a.Type == "VirtualDisk" {
		if _, err := storage.ReadVHDX(a.Path); err != nil {
			return prefixField(err, field+".Path: ")
		}
		return nil
	}
	if _, err := os.Stat(a.Path); err != nil {
		return hresult.Errorf(computecore.E_FILE_NOT_FOUND, "%s.Path: %q: %v", field, a.Path, err)
	}
	return nil
}

// setupVMLocked checks the VM's host paths and makes its cgroup limits: what HCS does when the
// VM is created. Nothing runs until Start.
func (s *system) setupVMLocked(ctx context.Context) error {
	doc := s.doc.VirtualMachine
	for i, sh := range doc.Devices.VirtualSmb.Shares {
		if err := checkShareHost(fmt.Sprintf("VirtualMachine.Devices.VirtualSmb.Shares[%d]", i), &sh); err != nil {
			return err
		}
	}
	for _, ctrl := range slices.Sorted(maps.Keys(doc.Devices.Scsi)) {
		for _, lun := range slices.Sorted(maps.Keys(doc.Devices.Scsi[ctrl].Attachments)) {
			a := doc.Devices.Scsi[ctrl].Attachments[lun]
			if err := checkAttachmentHost(fmt.Sprintf("VirtualMachine.Devices.Scsi.%s.Attachments.%s", ctrl, lun), &a); err != nil {
				return err
			}
		}
	}
	s.vm = newVMState(s.e, s.id, doc)
	if err := s.applyVMLimitsLocked(); err != nil {
		return err
	}
	return s.setupVMNetworkLocked(ctx, doc.Devices.NetworkAdapters)
}

// applyVMLimitsLocked sets the VM's cgroup: memory.limit = SizeInMB, CPU quota = Count
// processors scaled by Limit (100000 = all of each), shares = Weight.
func (s *system) applyVMLimitsLocked() error {
	vm := s.vm
	if err := s.cg.setMemory(vm.memMB); err != nil {
		return hresult.Errorf(computecore.E_INVALIDARG, "VirtualMachine.ComputeTopology.Memory.SizeInMB: %d MB for VM %q: %v", vm.memMB, s.id, err)
	}
	limit := vm.limit
	if limit == 0 {
		limit = maxVMProcessorLimit
	}
	// Expressed as the container mapping's Maximum (a share of the host in 1/10000), so one
	// mechanism sets the quota: Count×Limit of one processor each.
	maximum := uint64(vm.count) * limit / 10 / uint64(max(s.e.hostCPUs, 1))
	if err := s.cg.setProcessor(vm.count, max(maximum, 1), vm.weight, s.e.hostCPUs); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "VirtualMachine.ComputeTopology.Processor of VM %q: %v", s.id, err)
	}
	return nil
}

// bootFile is where a VmbFs boot finds the boot manager: DevicePath under the "os" share.
func (vm *vmState) bootFile(devicePath string) (string, error) {
	os := vm.shares[schema2.UVMOSShareName]
	rel, ok := winToRel(devicePath)
	if !ok || rel == "" {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "VirtualMachine.Chipset.Uefi.BootThis.DevicePath: %q is not a path in the VmbFs root", devicePath)
	}
	return filepath.Join(os.share.Path, filepath.FromSlash(rel)), nil
}

// startVMLocked boots the VM: budget, boot files, build, guest root, the VM init in its
// namespaces and cgroup, the guest connection. On failure nothing is left and the VM stays
// Created.
func (s *system) startVMLocked(ctx context.Context) (retErr error) {
	vm := s.vm
	doc := s.doc.VirtualMachine
	boot, err := vm.bootFile(doc.Chipset.Uefi.BootThis.DevicePath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(boot); err != nil {
		// Assumption: firmware that finds no boot manager ends the start; HCS reports the VM
		// ended while starting.
		return hresult.Errorf(computecore.HCS_E_TERMINATED_DURING_START, "start of VM %q: no boot manager %s in the VSMB share %q (%s): %v",
			s.id, doc.Chipset.Uefi.BootThis.DevicePath, schema2.UVMOSShareName, vm.shares[schema2.UVMOSShareName].share.Path, err)
	}
	osRoot := vm.shares[schema2.UVMOSShareName].share.Path
	b, ok, err := readOSBuild(osRoot)
	if err != nil {
		return err
	}
	if ok {
		host, _ := parseOSBuild(s.e.cfg.OSVersion)
		if b.Build > host.Build {
			return hresult.Errorf(computecore.HCS_E_IMAGE_MISMATCH, "start of VM %q: its OS (build %s, the share %q) is newer than the host's (build %s)", s.id, b.Version, schema2.UVMOSShareName, host.Version)
		}
		vm.build, vm.hasBuild = b, true
	}
	if err := s.e.vmHost.charge(s.id, vm.memMB); err != nil {
		return err
	}
	vm.charged = vm.memMB
	defer func() {
		if retErr != nil {
			s.releaseVMLocked(ctx)
		}
	}()
	if err := s.e.vmHost.prepareDir(); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: %v", s.id, err)
	}
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(vm.dir, d), 0o755); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "start of VM %q: %v", s.id, err)
		}
	}
	opts := "lowerdir=" + osRoot + ",upperdir=" + filepath.Join(vm.dir, "upper") + ",workdir=" + filepath.Join(vm.dir, "work") + ",index=off,redirect_dir=off,metacopy=off"
	if err := unix.Mount("overlay", vm.root, "overlay", 0, opts); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: mount its C: over %s: %v", s.id, osRoot, err)
	}
	if err := s.bootInitLocked(ctx); err != nil {
		return err
	}
	if vm.guest {
		if hr := s.e.vmFaults.guestFailure(s.id); hr != 0 {
			return hresult.Errorf(hr, "start of VM %q: the guest connection failed (fault injection)", s.id)
		}
		vm.connected = true
	}
	v, err := openVolume(vm.root)
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: %v", s.id, err)
	}
	s.vol, s.volPath = v, vm.root
	return nil
}

// bootInitLocked starts the VM init and waits until it holds its namespaces.
func (s *system) bootInitLocked(ctx context.Context) error {
	vm := s.vm
	self, err := os.Executable()
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: find hcsemu to start the VM init: %v", s.id, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: %v", s.id, err)
	}
	defer r.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: %v", s.id, err)
	}
	defer devNull.Close()
	attr := &os.ProcAttr{
		Dir:   "/",
		Env:   []string{vmInitEnv + "=" + vmHostname(s.id), vmInitRootEnv + "=" + vm.root, "PATH=/usr/bin:/bin"},
		Files: []*os.File{devNull, devNull, os.Stderr, w},
		Sys: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
			Pdeathsig:  syscall.SIGKILL, // see spawner: the daemon's death ends its VMs
			Setpgid:    true,
		},
	}
	// In the VM's network namespace (s.netns, vm_network_linux.go): the VM's own stack.
	p, err := s.e.sp.spawn(s.cg, s.netns, self, []string{layout.VMInitArg0}, attr)
	w.Close()
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: start its init: %v", s.id, err)
	}
	vm.init, vm.initDone = p, make(chan struct{})
	go s.watchInit(p, vm.initDone)

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	var got string
	select {
	case got = <-line:
	case <-ctx.Done():
		p.Kill()
		return hresult.Errorf(computecore.E_CANCELLED, "start of VM %q: %v", s.id, ctx.Err())
	case <-time.After(time.Minute):
		p.Kill()
		got = "no answer within a minute"
	}
	if got != "ready" {
		p.Kill()
		return hresult.Errorf(computecore.HCS_E_TERMINATED_DURING_START, "start of VM %q: its init failed: %s", s.id, got)
	}
	ns, err := openVMNamespaces(p.Pid)
	if err != nil {
		p.Kill()
		return hresult.Errorf(computecore.E_FAIL, "start of VM %q: open its namespaces: %v", s.id, err)
	}
	vm.ns = ns
	log.G(ctx).WithFields(log.Fields{"system": s.id, "init": p.Pid}).Debug("hcsemu: VM init ready")
	return nil
}

// watchInit reaps a VM init. If it dies while its VM runs, the VM has crashed.
func (s *system) watchInit(p *os.Process, done chan struct{}) {
	p.Wait()
	close(done)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vm != nil && s.vm.init == p && (s.state == schema2.StateRunning || s.state == schema2.StatePaused) {
		log.L.WithField("system", s.id).Warn("hcsemu: the VM init died: the VM crashed")
		s.stopLocked(context.Background(), schema2.NotificationUnexpectedExit)
	}
}

// releaseVMLocked undoes startVMLocked (and ends a running VM): the init and with it every
// process of the VM, the namespaces, the guest mounts, the budget.
func (s *system) releaseVMLocked(ctx context.Context) {
	vm := s.vm
	if vm.init != nil {
		vm.init.Kill()
		select {
		case <-vm.initDone:
		case <-time.After(10 * time.Second):
			log.G(ctx).WithField("system", s.id).Warn("hcsemu: the VM init did not exit")
		}
		vm.init = nil
	}
	if vm.ns != nil {
		vm.ns.close()
		vm.ns = nil
	}
	if s.vol != nil {
		s.vol.Close()
		s.vol, s.volPath = nil, ""
	}
	vm.connected = false
	// Guest mounts go with the VM: its folder is detached as a whole, deepest first.
	for k, d := range vm.dirs {
		_ = unix.Unmount(d.target, unix.MNT_DETACH)
		delete(vm.dirs, k)
	}
	for k, cl := range vm.layers {
		_ = unix.Unmount(cl.target, unix.MNT_DETACH)
		delete(vm.layers, k)
	}
	for k, m := range vm.mounts {
		_ = unix.Unmount(m.target, unix.MNT_DETACH)
		delete(vm.mounts, k)
		for _, c := range vm.scsi {
			for _, d := range c {
				d.mountedAt = ""
			}
		}
	}
	// A lazy unmount detaches the whole tree (hosted containers' mounts too); only then is the
	// folder plain files that may be removed: never remove through a mount.
	if err := unix.Unmount(vm.root, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, fs.ErrNotExist) {
		log.G(ctx).WithError(err).WithField("system", s.id).Warn("hcsemu: unmount the VM's C:; its folder is left")
	} else {
		os.RemoveAll(vm.dir)
	}
	if vm.charged > 0 {
		s.e.vmHost.release(vm.charged)
		vm.charged = 0
	}
}

// stopVMLocked is the VM part of stopLocked: everything inside ends, and so do its hosted
// containers, with the VM's exit type.
func (s *system) stopVMLocked(ctx context.Context, exitType schema2.NotificationType) {
	vm := s.vm
	hosted := make([]*system, 0, len(vm.sys))
	for _, h := range vm.sys {
		h.hosted.vmExit.Store(exitType)
		hosted = append(hosted, h)
	}
	s.releaseVMLocked(ctx)
	// Its processes are dead: its NICs go back to HNS, its network namespace goes.
	s.releaseVMNetworkLocked(ctx)
	// Hosted containers are locked after the VM's lock is let go (lock order above).
	s.e.cleanup.Add(1)
	go func() {
		defer s.e.cleanup.Done()
		for _, h := range hosted {
			h.mu.Lock()
			if h.state != schema2.StateStopped && !h.removed {
				h.stopLocked(context.WithoutCancel(ctx), exitType)
			}
			h.mu.Unlock()
		}
	}()
}

// runtimeID is the system's GUID: name-based on its id and instance, so a system re-created
// with the same id has another.
func (s *system) runtimeID() string {
	return hresult.NameToGUID(fmt.Sprintf("%s/%d", s.id, s.instance))
}

// vmExitStatus is the Status of a VM's SystemExited: HCS_E_UNEXPECTED_EXIT for a crash.
func vmExitStatus(exitType schema2.NotificationType) int32 {
	if exitType == schema2.NotificationUnexpectedExit {
		hr := computecore.HCS_E_UNEXPECTED_EXIT
		return int32(hr)
	}
	return 0
}

// vmPropertiesLocked adds a VM's "Memory" and "GuestConnection" properties.
func (s *system) vmPropertiesLocked(props *schema2.Properties, types []schema2.PropertyType) {
	vm := s.vm
	for _, t := range types {
		switch t {
		case schema2.PropertyTypeMemory:
			pages := vm.memMB << 20 / pageSize
			var used uint64
			if s.cg != nil && s.state != schema2.StateStopped {
				used = s.cg.stats().MemUsage
			}
			avail := int64(vm.memMB) - int64(used>>20)
			props.Memory = &schema2.MemoryInformationForVM{
				VirtualNodeCount: 1,
				VirtualMachineMemory: &schema2.VMMemory{
					AssignedMemory:  pages,
					AvailableMemory: int32(max(avail, 0)),
				},
			}
		case schema2.PropertyTypeGuestConnection:
			if vm.connected {
				props.GuestConnectionInfo = &schema2.GuestConnectionInfo{
					SupportedSchemaVersions: []schema2.Version{{Major: 2, Minor: 1}},
					ProtocolVersion:         4,
				}
			}
		}
	}
}

// guestPath maps a guest path (C:\…) of a running VM to the host path under its C:.
func (vm *vmState) guestPath(field, p string) (string, string, error) {
	rel, ok := winToRel(p)
	if !ok || rel == "" || len(p) < 2 || p[1] != ':' {
		return "", "", hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is not a path on the guest's C: (C:\\…, and not its root)", field, p)
	}
	return filepath.Join(vm.root, filepath.FromSlash(rel)), strings.ToLower(rel), nil
}

// vsmbPath resolves a VSMB share path of the guest (schema2.VSMBGuestPath…) to the share's name
// (lower-cased) and the host path it stands for.
func (vm *vmState) vsmbPath(field, p string) (name, host string, share *vsmbShare, err error) {
	prefix := strings.ToLower(schema2.VSMBGuestPathPrefix)
	if !strings.HasPrefix(strings.ToLower(p), prefix) {
		return "", "", nil, hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is not a VSMB share path (%s<share>)", field, p, schema2.VSMBGuestPathPrefix)
	}
	rest := p[len(prefix):]
	first, sub, _ := strings.Cut(rest, `\`)
	name = strings.ToLower(first)
	share = vm.shares[name]
	if share == nil || name == "ipc$" {
		return "", "", nil, hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: %q: the VM has no VSMB share %q", field, p, first)
	}
	host = share.share.Path
	for _, c := range strings.Split(sub, `\`) {
		switch c {
		case "", ".":
		case "..":
			return "", "", nil, hresult.Errorf(computecore.E_INVALIDARG, "%s: %q leaves the share", field, p)
		default:
			host = filepath.Join(host, c)
		}
	}
	return name, host, share, nil
}
