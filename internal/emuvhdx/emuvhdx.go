package emuvhdx

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Format is Header.Format.
const Format = "hcsemu-vhdx"

// FSSuffix names a disk's file system folder when its header names none: the disk file's
// path with this suffix.
const FSSuffix = ".fs"

// Header is the content of an emulated VHDX file.
type Header struct {
	Format      string `json:"format"`
	VirtualSize uint64 `json:"virtualSize"`
	// FileSystem is the folder holding the disk's file system, relative to the folder of the
	// VHDX file ("." for that folder itself): its Files/ is the volume's root and work/
	// overlayfs's work folder. Empty: the file's path with FSSuffix. A snapshotter whose
	// scratch layer is a folder with Files/ names it with "." so that the disk and the folder
	// are one. Relative, so a copied folder keeps its meaning.
	FileSystem string `json:"fileSystem,omitempty"`
}

// Encode is the content of an emulated VHDX file of size bytes whose file system is the folder
// fileSystem (see Header.FileSystem).
func Encode(size uint64, fileSystem string) []byte {
	b, _ := json.Marshal(Header{Format: Format, VirtualSize: size, FileSystem: fileSystem})
	return b
}

// FileSystemDir is the folder holding the file system of the emulated disk at path with header
// h. A FileSystem that is absolute or leaves the disk's folder is an error.
func (h Header) FileSystemDir(path string) (string, error) {
	if h.FileSystem == "" {
		return path + FSSuffix, nil
	}
	fs := filepath.Clean(h.FileSystem)
	if filepath.IsAbs(fs) || fs == ".." || strings.HasPrefix(fs, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("fileSystem %q is not a folder inside the disk's folder", h.FileSystem)
	}
	return filepath.Join(filepath.Dir(path), fs), nil
}
