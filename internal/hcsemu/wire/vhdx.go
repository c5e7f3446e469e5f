package wire

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// The emulated VHDX: what stands for a virtual disk file (sandbox.vhdx, SystemTemplate.vhdx)
// under the emulator, a small JSON header. It is here, with the protocol, because more than the
// daemon writes it: the Linux snapshotter makes the scratch disks of its snapshots as
// containerd's Windows snapshotter makes sandbox.vhdx, and the test images carry a
// SystemTemplate.vhdx. The daemon attaches such a disk (the storage filter, a utility VM's SCSI
// controller) and mounts its file system.

// VHDXFormat is VHDXHeader.Format.
const VHDXFormat = "hcsemu-vhdx"

// VHDXFSSuffix names a disk's file system folder when its header names none: the disk file's
// path with this suffix.
const VHDXFSSuffix = ".fs"

// VHDXHeader is the content of an emulated VHDX file.
type VHDXHeader struct {
	Format      string `json:"format"`
	VirtualSize uint64 `json:"virtualSize"`
	// FileSystem is the folder holding the disk's file system, relative to the folder of the
	// VHDX file ("." for that folder itself): its Files/ is the volume's root and work/
	// overlayfs's work folder. Empty: the file's path with VHDXFSSuffix. A snapshotter whose
	// scratch layer is a folder with Files/ names it with "." so that the disk and the folder
	// are one. Relative, so a copied folder keeps its meaning.
	FileSystem string `json:"fileSystem,omitempty"`
}

// EncodeVHDX is the content of an emulated VHDX file of size bytes whose file system is the
// folder fileSystem (see VHDXHeader.FileSystem).
func EncodeVHDX(size uint64, fileSystem string) []byte {
	b, _ := json.Marshal(VHDXHeader{Format: VHDXFormat, VirtualSize: size, FileSystem: fileSystem})
	return b
}

// FileSystemDir is the folder holding the file system of the emulated disk at path with header
// h. A FileSystem that is absolute or leaves the disk's folder is an error.
func (h VHDXHeader) FileSystemDir(path string) (string, error) {
	if h.FileSystem == "" {
		return path + VHDXFSSuffix, nil
	}
	fs := filepath.Clean(h.FileSystem)
	if filepath.IsAbs(fs) || fs == ".." || strings.HasPrefix(fs, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("fileSystem %q is not a folder inside the disk's folder", h.FileSystem)
	}
	return filepath.Join(filepath.Dir(path), fs), nil
}
