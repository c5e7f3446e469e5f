package storage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// The storage filter's portable half: volume paths, NameToGuid and the emulated VHDX files. The
// mounts are in filter_linux.go.

// volumeRe matches a volume GUID path, \\?\Volume{GUID}\ (the trailing backslash optional), as
// GetVolumeNameForVolumeMountPoint returns them
// (https://learn.microsoft.com/windows/win32/fileio/naming-a-volume).
var volumeRe = regexp.MustCompile(`^\\\\\?\\Volume\{([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\}\\?$`)

// volumeGUID returns the GUID (lower case) a volume path names, or false for any other path.
func VolumeGUID(p string) (string, bool) {
	m := volumeRe.FindStringSubmatch(p)
	if m == nil {
		return "", false
	}
	return strings.ToLower(m[1]), true
}

// volumePath is the volume GUID path of guid, as vmcompute's GetLayerMountPath spells it (with
// the trailing backslash: hcsshim and containerd hand it to HCS as Container.Storage.Path).
func volumePath(guid string) string { return `\\?\Volume{` + guid + `}\` }

// The emulated VHDX (package internal/emuvhdx). A scratch layer's disk is a file named like Windows'
// (sandbox.vhdx, copied from a base layer's blank.vhdx as containerd does) that holds a small JSON
// header; the file system on it is the folder beside it with the suffix vhdxFSSuffix (created
// when the disk is first attached), or the folder its header names, whose Files/ is the volume's
// root and work/ overlayfs's work folder. Copying a file without a named folder therefore copies
// an empty disk, as copying Windows' differencing template does.
const (
	vhdxFSSuffix = emuvhdx.FSSuffix
	// defaultVHDXSize is the size of the scratch template ProcessBaseImage makes: 20 GB, the
	// default size of a Windows container's scratch (hcsshim, containerd's windows snapshotter).
	defaultVHDXSize = 20 << 30
	vhdxMagic       = emuvhdx.Format
)

type vhdxHeader = emuvhdx.Header

func writeVHDX(path string, size uint64) error {
	return atomicfile.WriteFile(path, emuvhdx.Encode(size, ""), 0o644)
}

// vhdxFileSystem reads the emulated VHDX at path and returns the folder of its file system.
func VHDXFileSystem(path string) (string, error) {
	h, err := ReadVHDX(path)
	if err != nil {
		return "", err
	}
	fs, err := h.FileSystemDir(path)
	if err != nil {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "virtual disk %q: %v", path, err)
	}
	return fs, nil
}

// readVHDX reads an emulated VHDX's header. A file that is not one is ERROR_FILE_CORRUPT's
// cousin for virtual disks, which this emulator reports as E_INVALIDARG naming the file.
func ReadVHDX(path string) (vhdxHeader, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return vhdxHeader{}, hresult.Errorf(computecore.E_FILE_NOT_FOUND, "virtual disk %q: %v", path, err)
	}
	var h vhdxHeader
	if err := json.Unmarshal(b, &h); err != nil || h.Format != vhdxMagic {
		return vhdxHeader{}, hresult.Errorf(computecore.E_INVALIDARG, "virtual disk %q is not a virtual disk this emulator made", path)
	}
	return h, nil
}

// checkDosDevices checks a LayerArgs.DosDevices ("" is none).
func CheckDosDevices(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) || filepath.Base(dir) != "dosdevices" {
		return hresult.Errorf(computecore.E_INVALIDARG, "DosDevices: %q is not a Wine prefix's dosdevices folder", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "DosDevices: %q is not a folder", dir)
	}
	return nil
}
