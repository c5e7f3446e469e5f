package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
)

// HcsModifyComputeSystem on a utility VM: hot-plug of VSMB shares, SCSI disks and mapped pipes,
// memory and processor limits, and the guest requests HCS forwards to the guest (docs/emulator.md has
// the table). An Add runs the host part, then the guest part (undoing the host part if the guest part
// fails); a Remove runs the guest part first, as hcsshim orders them (internal/uvm/modify.go).

const (
	scsiPathPrefix      = "VirtualMachine/Devices/Scsi/"
	pipePathPrefix      = "VirtualMachine/Devices/MappedPipes/"
	hvServicePathPrefix = "VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/"
)

// Win32 errors of modify requests. Assumptions: HCS documents none of these cases
// (docs/notes/hyperv.md §3, "Not found").
const (
	errShareInUse = hresult.ErrBusy     // removing something a container or mount still uses
	errAbsent     = hresult.ErrNotFound // removing something that is not there
)

func (s *system) modifyVMLocked(ctx context.Context, req *schema2.ModifySettingRequest) error {
	vm := s.vm
	if !allowed(s.state, opModifyVM) {
		return hresult.Errorf(computecore.HCS_E_INVALID_STATE, "modify VM %q: not valid in state %s", s.id, s.state)
	}
	var guest *schema2.GuestModifySettingRequest
	if req.GuestRequest != nil {
		b, _ := json.Marshal(req.GuestRequest)
		guest = &schema2.GuestModifySettingRequest{}
		if err := hresult.Decode(string(b), guest, "GuestRequest"); err != nil {
			return prefixField(err, "GuestRequest.")
		}
		if !vm.connected {
			return hresult.Errorf(computecore.E_NOT_SUPPORTED, "GuestRequest: VM %q has no guest connection (it is not running, or has no VirtualMachine.GuestConnection)", s.id)
		}
	}
	var settings []byte
	if req.Settings != nil {
		settings, _ = json.Marshal(req.Settings)
	}
	host, err := s.hostModifyLocked(ctx, req, settings)
	if err != nil {
		return err
	}
	if host == nil && guest == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "ResourcePath: missing required field (or GuestRequest)")
	}
	if req.RequestType == schema2.RequestTypeRemove {
		if guest != nil {
			if err := s.guestModifyLocked(ctx, guest); err != nil {
				return err
			}
		}
		if host != nil {
			return host.apply()
		}
		return nil
	}
	if host != nil {
		if err := host.apply(); err != nil {
			return err
		}
	}
	if guest != nil {
		if err := s.guestModifyLocked(ctx, guest); err != nil {
			if host != nil && host.undo != nil {
				host.undo()
			}
			return err
		}
	}
	return nil
}

// hostChange is a checked host-side change, applied once the guest side allows it.
type hostChange struct {
	apply func() error
	undo  func()
}

func wantRequestType(req *schema2.ModifySettingRequest, types ...schema2.RequestType) error {
	for _, t := range types {
		if req.RequestType == t {
			return nil
		}
	}
	return hresult.Errorf(computecore.E_INVALIDARG, "RequestType: %q is not valid for ResourcePath %q", req.RequestType, req.ResourcePath)
}

func decodeSettings(settings []byte, v any) error {
	if settings == nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings: missing required field")
	}
	return hresult.Decode(string(settings), v, "Settings")
}

// hostModifyLocked checks the host part of req and returns it, unapplied (nil: none).
func (s *system) hostModifyLocked(ctx context.Context, req *schema2.ModifySettingRequest, settings []byte) (*hostChange, error) {
	vm := s.vm
	p := req.ResourcePath
	switch {
	case p == "":
		return nil, nil
	case p == schema2.ResourcePathVSMBShares:
		return s.modifyShareLocked(ctx, req, settings)
	case strings.HasPrefix(p, scsiPathPrefix):
		return s.modifySCSILocked(ctx, req, settings)
	case strings.HasPrefix(p, pipePathPrefix):
		if err := wantRequestType(req, schema2.RequestTypeAdd, schema2.RequestTypeRemove); err != nil {
			return nil, err
		}
		pipe := p[len(pipePathPrefix):]
		name, ok := strings.CutPrefix(strings.ToLower(pipe), `\\.\pipe\`)
		if !ok || name == "" || strings.Contains(name, `\`) {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q: not a host pipe path (\\\\.\\pipe\\<name>)", p)
		}
		if settings != nil && string(settings) != "null" {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings: a mapped pipe takes none")
		}
		key := `\\.\pipe\` + name
		if req.RequestType == schema2.RequestTypeAdd {
			if _, dup := vm.pipes[key]; dup {
				return nil, hresult.Errorf(errAlreadyExists, "ResourcePath: %q is already mapped into VM %q", pipe, s.id)
			}
			return &hostChange{apply: func() error { vm.pipes[key] = pipe; return nil }, undo: func() { delete(vm.pipes, key) }}, nil
		}
		if _, ok := vm.pipes[key]; !ok {
			return nil, hresult.Errorf(errAbsent, "ResourcePath: %q is not mapped into VM %q", pipe, s.id)
		}
		for id, h := range vm.hosted {
			for _, hp := range h.pipes {
				if hp == key {
					return nil, hresult.Errorf(errShareInUse, "ResourcePath: %q is used by container %q", pipe, id)
				}
			}
		}
		return &hostChange{apply: func() error { delete(vm.pipes, key); return nil }}, nil
	case strings.HasPrefix(p, hvServicePathPrefix):
		return s.modifyHvServiceLocked(req, settings)
	case p == schema2.ResourcePathVMMemory:
		// hcsshim sends no RequestType for a resize (internal/uvm/memory_update.go).
		if err := wantRequestType(req, "", schema2.RequestTypeUpdate); err != nil {
			return nil, err
		}
		var mb uint64
		if err := decodeSettings(settings, &mb); err != nil {
			return nil, err
		}
		if mb == 0 {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings: 0 MB: a VM needs memory")
		}
		return &hostChange{apply: func() error { return s.resizeVMLocked(mb) }}, nil
	case p == schema2.ResourcePathVMProcessorLimits:
		if err := wantRequestType(req, "", schema2.RequestTypeUpdate); err != nil {
			return nil, err
		}
		var l schema2.ProcessorLimits
		if err := decodeSettings(settings, &l); err != nil {
			return nil, err
		}
		if err := validateProcessorLimits("Settings", l.Limit, l.Weight); err != nil {
			return nil, err
		}
		return &hostChange{apply: func() error {
			old, oldW := vm.limit, vm.weight
			vm.limit, vm.weight = l.Limit, l.Weight
			if err := s.applyVMLimitsLocked(); err != nil {
				vm.limit, vm.weight = old, oldW
				return err
			}
			return nil
		}}, nil
	}
	if strings.HasPrefix(p, nicPathPrefix) {
		return s.modifyNICLocked(context.Background(), req, settings)
	}
	return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q is not a resource of a utility VM the emulator knows", p)
}

// resizeVMLocked changes the VM's memory: the budget first (while it runs), then the cgroup
// (which refuses a limit below what the VM uses).
func (s *system) resizeVMLocked(mb uint64) error {
	vm := s.vm
	if vm.charged > 0 && mb > vm.charged {
		if err := s.e.vmHost.charge(s.id, mb-vm.charged); err != nil {
			return err
		}
		vm.charged = mb
	}
	old := vm.memMB
	vm.memMB = mb
	if err := s.cg.setMemory(mb); err != nil {
		vm.memMB = old
		return hresult.Errorf(computecore.E_INVALIDARG, "Settings: %d MB for VM %q: %v (less than it uses?)", mb, s.id, err)
	}
	if vm.charged > mb {
		s.e.vmHost.release(vm.charged - mb)
		vm.charged = mb
	}
	return nil
}

func (s *system) modifyShareLocked(ctx context.Context, req *schema2.ModifySettingRequest, settings []byte) (*hostChange, error) {
	vm := s.vm
	if err := wantRequestType(req, schema2.RequestTypeAdd, schema2.RequestTypeUpdate, schema2.RequestTypeRemove); err != nil {
		return nil, err
	}
	var sh schema2.VirtualSmbShare
	if err := decodeSettings(settings, &sh); err != nil {
		return nil, err
	}
	if sh.Path != "" {
		if err := hostPathsOf(ctx).resolveIn("Settings.Path", &sh.Path); err != nil {
			return nil, err
		}
	}
	if sh.Name == "" {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings.Name: missing required field")
	}
	key := strings.ToLower(sh.Name)
	cur := vm.shares[key]
	switch req.RequestType {
	case schema2.RequestTypeAdd:
		if err := validateShare("Settings", &sh); err != nil {
			return nil, err
		}
		if cur != nil {
			return nil, hresult.Errorf(errAlreadyExists, "Settings.Name: %q: VM %q already has a share of that name", sh.Name, s.id)
		}
		if err := checkShareHost("Settings", &sh); err != nil {
			return nil, err
		}
		return &hostChange{apply: func() error { vm.shares[key] = &vsmbShare{share: sh}; return nil }, undo: func() { delete(vm.shares, key) }}, nil
	case schema2.RequestTypeUpdate:
		if cur == nil {
			return nil, hresult.Errorf(errAbsent, "Settings.Name: %q: VM %q has no such share", sh.Name, s.id)
		}
		// Only AllowedFiles of a RestrictFileAccess share may change (hcsshim internal/uvm/vsmb.go).
		if cur.share.Options == nil || !cur.share.Options.RestrictFileAccess {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings.AllowedFiles: the share %q was not added with RestrictFileAccess", sh.Name)
		}
		if sh.Path != "" && sh.Path != cur.share.Path {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "Settings.Path: %q: the path of share %q cannot change (it is %q)", sh.Path, sh.Name, cur.share.Path)
		}
		next := cur.share
		next.AllowedFiles = sh.AllowedFiles
		if err := validateShare("Settings", &next); err != nil {
			return nil, err
		}
		if err := checkShareHost("Settings", &next); err != nil {
			return nil, err
		}
		return &hostChange{apply: func() error { cur.share = next; return nil }}, nil
	}
	if cur == nil {
		return nil, hresult.Errorf(errAbsent, "Settings.Name: %q: VM %q has no such share", sh.Name, s.id)
	}
	if key == schema2.UVMOSShareName {
		return nil, hresult.Errorf(errShareInUse, "Settings.Name: %q: the VM boots from it", sh.Name)
	}
	if user, busy := vm.usesShare(key); busy {
		return nil, hresult.Errorf(errShareInUse, "Settings.Name: %q is in use by %q", sh.Name, user)
	}
	return &hostChange{apply: func() error { delete(vm.shares, key); return nil }}, nil
}

func (s *system) modifySCSILocked(ctx context.Context, req *schema2.ModifySettingRequest, settings []byte) (*hostChange, error) {
	vm := s.vm
	rest := req.ResourcePath[len(scsiPathPrefix):]
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[1] != "Attachments" {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q is not %s<controller>/Attachments/<lun>", req.ResourcePath, scsiPathPrefix)
	}
	ctrl := parts[0]
	luns, ok := vm.scsi[ctrl]
	if !ok {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q: VM %q has no SCSI controller %q", req.ResourcePath, s.id, ctrl)
	}
	lun, err := parseLUN(parts[2])
	if err != nil {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q: %v", req.ResourcePath, err)
	}
	if err := wantRequestType(req, schema2.RequestTypeAdd, schema2.RequestTypeRemove); err != nil {
		return nil, err
	}
	if req.RequestType == schema2.RequestTypeAdd {
		var a schema2.Attachment
		if err := decodeSettings(settings, &a); err != nil {
			return nil, err
		}
		if err := hostPathsOf(ctx).resolveIn("Settings.Path", &a.Path); err != nil {
			return nil, err
		}
		if err := validateAttachment("Settings", &a); err != nil {
			return nil, err
		}
		if cur := luns[lun]; cur != nil {
			return nil, hresult.Errorf(errAlreadyExists, "ResourcePath: %q: LUN %d of controller %q holds %q", req.ResourcePath, lun, ctrl, cur.att.Path)
		}
		if err := checkAttachmentHost("Settings", &a); err != nil {
			return nil, err
		}
		return &hostChange{apply: func() error { luns[lun] = &scsiDisk{att: a}; return nil }, undo: func() { delete(luns, lun) }}, nil
	}
	cur := luns[lun]
	if cur == nil {
		return nil, hresult.Errorf(errAbsent, "ResourcePath: %q: nothing is attached at LUN %d of controller %q", req.ResourcePath, lun, ctrl)
	}
	return &hostChange{apply: func() error {
		if cur.mountedAt != "" {
			return hresult.Errorf(errShareInUse, "ResourcePath: %q: the disk is mounted in the guest at %q", req.ResourcePath, vm.mounts[cur.mountedAt].guestPath)
		}
		delete(luns, lun)
		return nil
	}}, nil
}

// controller0 is the SCSI controller a Windows guest mounts MappedVirtualDisks from: the only
// one, else the one keyed "0" or hcsshim's first controller GUID (V5 of "0",
// internal/protocol/guestrequest ScsiControllerGuids). Assumption: HCS maps the guest's
// controller numbers to the document's keys in an order it does not document.
func (vm *vmState) controller0() (string, bool) {
	if len(vm.scsi) == 1 {
		for k := range vm.scsi {
			return k, true
		}
	}
	for _, k := range []string{"0", "df6d0690-79e5-55b6-a5ec-c1e2f77f580a"} {
		if _, ok := vm.scsi[k]; ok {
			return k, true
		}
	}
	return "", false
}

func (s *system) guestModifyLocked(ctx context.Context, g *schema2.GuestModifySettingRequest) error {
	if g.RequestType != schema2.RequestTypeAdd && g.RequestType != schema2.RequestTypeRemove {
		return hresult.Errorf(computecore.E_INVALIDARG, "GuestRequest.RequestType: %q is not Add or Remove", g.RequestType)
	}
	var settings []byte
	if g.Settings != nil {
		settings, _ = json.Marshal(g.Settings)
	}
	decode := func(v any) error {
		if settings == nil {
			return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "GuestRequest.Settings: missing required field")
		}
		if err := hresult.Decode(string(settings), v, "GuestRequest.Settings"); err != nil {
			return prefixField(err, "GuestRequest.")
		}
		return nil
	}
	if handled, err := s.guestNetworkLocked(g, decode); handled {
		return err
	}
	switch g.ResourceType {
	case schema2.ResourceTypeMappedVirtualDisk:
		var m schema2.MappedVirtualDisk
		if err := decode(&m); err != nil {
			return err
		}
		return s.guestDiskLocked(g.RequestType, &m)
	case schema2.ResourceTypeCombinedLayers:
		var cl schema2.CombinedLayers
		if err := decode(&cl); err != nil {
			return err
		}
		return s.guestLayersLocked(g.RequestType, &cl)
	case schema2.ResourceTypeMappedDirectory:
		var md schema2.MappedDirectory
		if err := decode(&md); err != nil {
			return err
		}
		return s.guestDirLocked(g.RequestType, &md)
	case "":
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "GuestRequest.ResourceType: missing required field")
	}
	return hresult.Errorf(computecore.E_NOTIMPL, "GuestRequest.ResourceType: %q is not emulated (MappedVirtualDisk, CombinedLayers, MappedDirectory, NetworkNamespace and Network are)", g.ResourceType)
}

func (s *system) guestDiskLocked(rt schema2.RequestType, m *schema2.MappedVirtualDisk) error {
	vm := s.vm
	const f = "GuestRequest.Settings"
	target, key, err := vm.guestPath(f+".ContainerPath", m.ContainerPath)
	if err != nil {
		return err
	}
	if rt == schema2.RequestTypeRemove {
		gm := vm.mounts[key]
		if gm == nil {
			return hresult.Errorf(errAbsent, "%s.ContainerPath: %q: no disk is mounted there in VM %q", f, m.ContainerPath, s.id)
		}
		if _, busy := vm.layers[key]; busy {
			return hresult.Errorf(errShareInUse, "%s.ContainerPath: %q: CombinedLayers are applied on it", f, m.ContainerPath)
		}
		if err := unix.Unmount(gm.target, unix.MNT_DETACH); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "%s.ContainerPath: unmount %q in VM %q: %v", f, m.ContainerPath, s.id, err)
		}
		delete(vm.mounts, key)
		if d := vm.scsi[gm.ctrl][gm.lun]; d != nil {
			d.mountedAt = ""
		}
		return nil
	}
	ctrl, ok := vm.controller0()
	if !ok {
		return hresult.Errorf(computecore.E_INVALIDARG, "%s.Lun: VM %q has no SCSI controller 0", f, s.id)
	}
	d := vm.scsi[ctrl][m.Lun]
	switch {
	case d == nil:
		return hresult.Errorf(errAbsent, "%s.Lun: nothing is attached at LUN %d of controller %q of VM %q", f, m.Lun, ctrl, s.id)
	case d.mountedAt != "":
		return hresult.Errorf(errAlreadyExists, "%s.Lun: the disk at LUN %d is already mounted at %q", f, m.Lun, vm.mounts[d.mountedAt].guestPath)
	case d.att.Type != "VirtualDisk":
		return hresult.Errorf(computecore.E_NOTIMPL, "%s.Lun: LUN %d holds a %s; the emulator mounts virtual disks only", f, m.Lun, d.att.Type)
	}
	if _, dup := vm.mounts[key]; dup {
		return hresult.Errorf(errAlreadyExists, "%s.ContainerPath: %q: a disk is already mounted there", f, m.ContainerPath)
	}
	fsDir, err := storage.VHDXFileSystem(d.att.Path)
	if err != nil {
		return prefixField(err, f+".Lun: ")
	}
	for _, sub := range []string{"Files", "work"} {
		if err := os.MkdirAll(filepath.Join(fsDir, sub), 0o755); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "%s.Lun: the file system of %q: %v", f, d.att.Path, err)
		}
	}
	if err := storage.BindMount(filepath.Join(fsDir, "Files"), target, d.att.ReadOnly); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "%s.ContainerPath: mount LUN %d at %q in VM %q: %v", f, m.Lun, m.ContainerPath, s.id, err)
	}
	vm.mounts[key] = &guestMount{guestPath: m.ContainerPath, ctrl: ctrl, lun: m.Lun, target: target, fs: fsDir}
	d.mountedAt = key
	return nil
}

func (s *system) guestLayersLocked(rt schema2.RequestType, cl *schema2.CombinedLayers) error {
	vm := s.vm
	const f = "GuestRequest.Settings"
	target, key, err := vm.guestPath(f+".ContainerRootPath", cl.ContainerRootPath)
	if err != nil {
		return err
	}
	if rt == schema2.RequestTypeRemove {
		cur := vm.layers[key]
		if cur == nil {
			return hresult.Errorf(errAbsent, "%s.ContainerRootPath: %q: no CombinedLayers there in VM %q", f, cl.ContainerRootPath, s.id)
		}
		for id, h := range vm.hosted {
			if h.layers == key {
				return hresult.Errorf(errShareInUse, "%s.ContainerRootPath: %q is the storage of container %q", f, cl.ContainerRootPath, id)
			}
		}
		if err := unix.Unmount(cur.target, unix.MNT_DETACH); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "%s.ContainerRootPath: remove the layers at %q: %v", f, cl.ContainerRootPath, err)
		}
		delete(vm.layers, key)
		return nil
	}
	gm := vm.mounts[key]
	if gm == nil {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s.ContainerRootPath: %q: no disk is mounted there (MappedVirtualDisk) in VM %q", f, cl.ContainerRootPath, s.id)
	}
	if _, dup := vm.layers[key]; dup {
		return hresult.Errorf(errAlreadyExists, "%s.ContainerRootPath: %q: layers are already combined there", f, cl.ContainerRootPath)
	}
	if len(cl.Layers) == 0 {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "%s.Layers: missing required field", f)
	}
	var lowers, shares []string
	for i, l := range cl.Layers {
		field := fmt.Sprintf("%s.Layers[%d].Path", f, i)
		name, host, _, err := vm.vsmbPath(field, l.Path)
		if err != nil {
			return err
		}
		files := filepath.Join(host, "Files")
		if err := statDir(files); err != nil {
			return hresult.Errorf(computecore.HCS_E_INVALID_LAYER, "%s: %q: not a layer (%s: %v)", field, l.Path, files, err)
		}
		if strings.ContainsAny(files, ":,") {
			return hresult.Errorf(computecore.E_INVALIDARG, "%s: %q: the emulator cannot combine a layer whose folder has ':' or ','", field, l.Path)
		}
		lowers = append(lowers, files)
		shares = append(shares, name)
	}
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + filepath.Join(gm.fs, "Files") + ",workdir=" + filepath.Join(gm.fs, "work") + ",index=off,redirect_dir=off,metacopy=off"
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "%s.ContainerRootPath: combine the layers at %q in VM %q: %v", f, cl.ContainerRootPath, s.id, err)
	}
	vm.layers[key] = &combinedLayers{guestPath: cl.ContainerRootPath, target: target, shares: shares}
	return nil
}

func (s *system) guestDirLocked(rt schema2.RequestType, md *schema2.MappedDirectory) error {
	vm := s.vm
	const f = "GuestRequest.Settings"
	target, key, err := vm.guestPath(f+".ContainerPath", md.ContainerPath)
	if err != nil {
		return err
	}
	if rt == schema2.RequestTypeRemove {
		cur := vm.dirs[key]
		if cur == nil {
			return hresult.Errorf(errAbsent, "%s.ContainerPath: %q is not mapped in VM %q", f, md.ContainerPath, s.id)
		}
		if err := unix.Unmount(cur.target, unix.MNT_DETACH); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "%s.ContainerPath: unmap %q: %v", f, md.ContainerPath, err)
		}
		delete(vm.dirs, key)
		return nil
	}
	if _, dup := vm.dirs[key]; dup {
		return hresult.Errorf(errAlreadyExists, "%s.ContainerPath: %q is already mapped in VM %q", f, md.ContainerPath, s.id)
	}
	name, host, share, err := vm.vsmbPath(f+".HostPath", md.HostPath)
	if err != nil {
		return err
	}
	if err := statDir(host); err != nil {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s.HostPath: %q: %v", f, md.HostPath, err)
	}
	ro := md.ReadOnly || (share.share.Options != nil && share.share.Options.ReadOnly)
	if err := storage.BindMount(host, target, ro); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "%s.ContainerPath: map %q at %q in VM %q: %v", f, md.HostPath, md.ContainerPath, s.id, err)
	}
	vm.dirs[key] = &guestDir{md: *md, target: target, share: name}
	return nil
}

// modifyHvServiceLocked changes the VM's HvSocket service table. Update creates an entry that is
// not there and replaces one that is; an Update with Disabled and no descriptors removes it;
// Remove removes it (hcsshim's internal/uvm/hvsocket.go UpdateHvSocketService comment: "The same
// call on HvSockets side handles the Create/Update/Delete cases"; Microsoft's schema documents
// ServiceTable as keyed by service GUID). Assumptions (undocumented): Add is not a request type of
// the table (hcsshim never sends one), removing an absent entry is ERROR_NOT_FOUND, and removing
// one a hosted container uses (its credential instance's) is ERROR_BUSY, as for shares and pipes.
func (s *system) modifyHvServiceLocked(req *schema2.ModifySettingRequest, settings []byte) (*hostChange, error) {
	vm := s.vm
	if err := wantRequestType(req, schema2.RequestTypeUpdate, schema2.RequestTypeRemove); err != nil {
		return nil, err
	}
	id := req.ResourcePath[len(hvServicePathPrefix):]
	if !guidRe.MatchString(id) {
		return nil, hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q: %q is not a service GUID", req.ResourcePath, id)
	}
	key := strings.ToLower(id)
	remove := req.RequestType == schema2.RequestTypeRemove
	var cfg schema2.HvSocketServiceConfig
	if !remove {
		if err := decodeSettings(settings, &cfg); err != nil {
			return nil, err
		}
		remove = cfg.Disabled && cfg.BindSecurityDescriptor == "" && cfg.ConnectSecurityDescriptor == ""
		if !remove {
			return &hostChange{apply: func() error { vm.hvServices[key] = cfg; return nil }}, nil
		}
	}
	if _, ok := vm.hvServices[key]; !ok {
		return nil, hresult.Errorf(errAbsent, "ResourcePath: %q: VM %q has no HvSocket service %s", req.ResourcePath, s.id, id)
	}
	for cid, h := range vm.hosted {
		if slices.Contains(h.services, key) {
			return nil, hresult.Errorf(errShareInUse, "ResourcePath: %q: HvSocket service %s is used by container %q", req.ResourcePath, id, cid)
		}
	}
	return &hostChange{apply: func() error { delete(vm.hvServices, key); return nil }}, nil
}
