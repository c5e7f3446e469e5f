package compute

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// hostPaths is how one client's Windows drive letters map to folders on this machine
// (wire.MethodClientPaths): a stand-in/emulator contract, not a Windows behaviour. On Windows
// the shim's documents carry real host paths that HCS opens as they are; under Wine they carry
// the paths Wine shows the shim (Z:\tmp\…), which this daemon resolves as Wine does, through
// the client prefix's dosdevices links.
type hostPaths struct {
	dosDevices string
	volumes    map[string]byte // volume GUID (lower case) to drive letter (lower case)
}

// newHostPaths checks a ClientPaths request's args.
func newHostPaths(a wire.ClientPathsArgs) (*hostPaths, error) {
	if a.DosDevices == "" {
		return nil, hresult.Errorf(computecore.HCS_E_INVALID_JSON, "dosDevices: missing required field")
	}
	if err := storage.CheckDosDevices(a.DosDevices); err != nil {
		return nil, err
	}
	hp := &hostPaths{dosDevices: filepath.Clean(a.DosDevices), volumes: map[string]byte{}}
	for name, drive := range a.Volumes {
		guid, ok := storage.VolumeGUID(name)
		if !ok {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "volumes: %q is not a volume name (\\\\?\\Volume{GUID}\\)", name)
		}
		if len(drive) != 1 || drive[0]|0x20 < 'a' || drive[0]|0x20 > 'z' {
			return nil, hresult.Errorf(computecore.E_INVALIDARG, "volumes[%q]: %q is not a drive letter", name, drive)
		}
		hp.volumes[guid] = drive[0] | 0x20
	}
	return hp, nil
}

type hostPathsKey struct{}

// withHostPaths gives the requests of a connection its client's mapping (nil: none given).
func withHostPaths(ctx context.Context, hp *hostPaths) context.Context {
	if hp == nil {
		return ctx
	}
	return context.WithValue(ctx, hostPathsKey{}, hp)
}

// hostPathsOf returns the mapping of the connection ctx serves, or nil.
func hostPathsOf(ctx context.Context) *hostPaths {
	hp, _ := ctx.Value(hostPathsKey{}).(*hostPaths)
	return hp
}

// driveRel splits a drive-absolute Windows path (X:\rest, or \\?\X:\rest) into its drive
// letter (lower case) and the rest; with hp, also \\?\Volume{GUID}\rest of one of the client's
// volumes. ok is false for anything else: a Linux path, another volume (the storage filter's),
// a VSMB or UNC path, a relative path.
func (hp *hostPaths) driveRel(p string) (drive byte, rest string, ok bool) {
	if hp != nil && len(p) > len(`\\?\Volume{}`) {
		if i := strings.Index(p, "}"); i > 0 {
			if guid, isVol := storage.VolumeGUID(p[:i+1]); isVol {
				if d, mine := hp.volumes[guid]; mine && (len(p) == i+1 || p[i+1] == '\\') {
					return d, p[min(i+2, len(p)):], true
				}
				return 0, "", false
			}
		}
	}
	p = strings.TrimPrefix(p, `\\?\`)
	if len(p) < 3 || p[1] != ':' || (p[2] != '\\' && p[2] != '/') {
		return 0, "", false
	}
	c := p[0] | 0x20
	if c < 'a' || c > 'z' {
		return 0, "", false
	}
	return c, p[3:], true
}

// resolve returns the path on this machine of the host path p in field of a document. A path
// that is not drive-absolute is returned as it is: a Linux client's path, or a name another
// part of the emulator resolves (a volume path of the storage filter). X:\rest (and
// \\?\Volume{GUID}\rest of the client's volume of drive X:) resolves to
// rest under the folder the client's <dosdevices>/x: link names, as Wine resolves it; without
// a mapping, on a drive the client's prefix has not, or with a ".." that climbs above the
// drive's root, it is refused with an error naming field.
//
// A path through a symbolic link names the link's target, as HCS maps a link's target on
// Windows: the links Windows programs make under Wine are Unix links
// (hack/wine/winesymlink.c), which the mounts follow when they open the resolved path
// (TestDaemonMappedSymlinks, TestHostedMappedSymlinks).
//
// Assumption: names match as spelled. Wine, like NTFS, would also find a name in another
// case; the Windows-built shim writes the paths it was given, in their case on disk.
func (hp *hostPaths) resolve(field, p string) (string, error) {
	drive, rest, ok := hp.driveRel(p)
	if !ok {
		return p, nil
	}
	if hp == nil {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "%s: %q is a Windows host path, and this client gave no drive mapping (%s)", field, p, wire.MethodClientPaths)
	}
	var parts []string
	for _, c := range strings.FieldsFunc(rest, func(r rune) bool { return r == '\\' || r == '/' }) {
		switch c {
		case ".":
		case "..":
			// Windows would stop at the drive's root; a path that tries to climb out of it
			// is refused instead, so that no document names a folder outside the mapping.
			if len(parts) == 0 {
				return "", hresult.Errorf(computecore.E_INVALIDARG, "%s: %q climbs above the root of drive %c:", field, p, drive-0x20)
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	root, err := filepath.EvalSymlinks(filepath.Join(hp.dosDevices, string(drive)+":"))
	if err != nil {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%s: %q: drive %c: is not mapped in the client's Wine prefix (%s): %v", field, p, drive-0x20, hp.dosDevices, err)
	}
	return filepath.Join(append([]string{root}, parts...)...), nil
}

// resolveComputeSystem rewrites, in place, each host path of a compute system document: a
// process-isolated container's MappedDirectories[].HostPath, a VM's VirtualSmb Shares[].Path
// and SCSI Attachments[].Path (the fields this emulator opens on the host). A hosted
// container's paths are the VM's (VSMB or guest paths), not the host's, and stay as they are.
func (hp *hostPaths) resolveComputeSystem(cs *schema2.ComputeSystem) error {
	if c := cs.Container; c != nil {
		for i := range c.MappedDirectories {
			md := &c.MappedDirectories[i]
			if err := hp.resolveIn(fmt.Sprintf("Container.MappedDirectories[%d].HostPath", i), &md.HostPath); err != nil {
				return err
			}
		}
	}
	vm := cs.VirtualMachine
	if vm == nil || vm.Devices == nil {
		return nil
	}
	if vsmb := vm.Devices.VirtualSmb; vsmb != nil {
		for i := range vsmb.Shares {
			if err := hp.resolveIn(fmt.Sprintf("VirtualMachine.Devices.VirtualSmb.Shares[%d].Path", i), &vsmb.Shares[i].Path); err != nil {
				return err
			}
		}
	}
	for _, ctrl := range slices.Sorted(maps.Keys(vm.Devices.Scsi)) {
		for _, lun := range slices.Sorted(maps.Keys(vm.Devices.Scsi[ctrl].Attachments)) {
			a := vm.Devices.Scsi[ctrl].Attachments[lun]
			if err := hp.resolveIn(fmt.Sprintf("VirtualMachine.Devices.Scsi.%s.Attachments.%s.Path", ctrl, lun), &a.Path); err != nil {
				return err
			}
			vm.Devices.Scsi[ctrl].Attachments[lun] = a
		}
	}
	return nil
}

// resolveIn resolves the host path *p in field in place.
func (hp *hostPaths) resolveIn(field string, p *string) error {
	r, err := hp.resolve(field, *p)
	if err != nil {
		return err
	}
	*p = r
	return nil
}
