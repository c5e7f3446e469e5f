package wclayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
)

// Names inside a layer folder, as hcsshim and HCS use them.
const (
	FilesDir       = "Files"
	HivesDir       = "Hives"
	UtilityVMDir   = "UtilityVM"
	LayerChainFile = "layerchain.json"

	// workDir and volumeDir exist only in a mounted scratch layer (overlayfs work directory and
	// mount point). They are runhcs's own names.
	workDir   = "work"
	volumeDir = "volume"
)

// exportRoots are the top-level folders of a layer that tars carry, in export order.
var exportRoots = []string{FilesDir, HivesDir, UtilityVMDir}

// WriteLayerChain writes layerchain.json in layer: the parent folders, nearest first.
func WriteLayerChain(layer string, parents []string) error {
	if parents == nil {
		parents = []string{}
	}
	b, err := json.Marshal(parents)
	if err != nil {
		return fmt.Errorf("encoding layer chain of %s: %w", layer, err)
	}
	p := filepath.Join(layer, LayerChainFile)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("writing layer chain: %w", err)
	}
	return nil
}

// ReadLayerChain reads layerchain.json in layer. A layer without one (a base layer) has no
// parents and gives a nil slice.
func ReadLayerChain(layer string) ([]string, error) {
	p := filepath.Join(layer, LayerChainFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading layer chain: %w", err)
	}
	var parents []string
	if err := json.Unmarshal(b, &parents); err != nil {
		return nil, fmt.Errorf("layer chain %s is not a JSON array of paths: %w: %w", p, err, errdefs.ErrInvalidArgument)
	}
	return parents, nil
}

// FilesPath is the Files folder of a layer: what overlayfs uses as a lower (or upper) directory.
func FilesPath(layer string) string { return filepath.Join(layer, FilesDir) }

// VolumePath is where Mount mounts the merged volume of a scratch layer.
func VolumePath(scratch string) string { return filepath.Join(scratch, volumeDir) }

// Limits on tar headers. A Windows path holds at most 32767 UTF-16 units (the \\?\ limit) and
// a component 255 (NTFS); a security descriptor is at most 64 KiB (its length is a 16-bit
// field, SECURITY_DESCRIPTOR_RELATIVE). Any PAX record above maxPAXValue is refused.
const (
	maxPathLen      = 32767
	maxComponentLen = 255
	maxPAXValue     = 64 << 10
)

// splitTarName checks a tar entry name and returns its segments ("Files", "a", "b"), the
// trailing-slash-free form. It refuses names that could leave the layer folder or that are
// outside the three prefixes. Backslashes count as separators, as they would on Windows.
func splitTarName(name string) ([]string, error) {
	if name == "" {
		return nil, errors.New("empty name")
	}
	if len(name) > maxPathLen {
		return nil, fmt.Errorf("name is %d bytes long, more than %d", len(name), maxPathLen)
	}
	if strings.ContainsRune(name, 0) {
		return nil, errors.New("name contains a NUL byte")
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(n, "/") {
		return nil, errors.New("absolute path")
	}
	if len(n) >= 2 && n[1] == ':' {
		return nil, errors.New("path with a drive letter")
	}
	n = strings.TrimRight(n, "/")
	var segs []string
	for _, s := range strings.Split(n, "/") {
		switch s {
		case "", ".":
			continue
		case "..":
			return nil, errors.New(`path has a ".." segment`)
		}
		if strings.ContainsRune(s, ':') {
			// A colon names an alternate data stream or a drive on Windows.
			return nil, fmt.Errorf("segment %q contains a colon", s)
		}
		if len(s) > maxComponentLen {
			return nil, fmt.Errorf("segment of %d bytes, more than %d", len(s), maxComponentLen)
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return nil, errors.New("empty name")
	}
	switch segs[0] {
	case FilesDir, HivesDir, UtilityVMDir:
	default:
		return nil, fmt.Errorf("entry outside %s/, %s/ and %s/", FilesDir, HivesDir, UtilityVMDir)
	}
	return segs, nil
}

// symlinkEscapes reports whether a relative symlink target, taken from the directory holding
// the link (segs without the last), climbs above the top folder of the layer (Files/ ...).
// Absolute Windows targets (C:\x, \x) resolve inside the container's own volume and are kept.
func symlinkEscapes(segs []string, target string) bool {
	t := strings.ReplaceAll(target, `\`, "/")
	if strings.HasPrefix(t, "/") || (len(t) >= 2 && t[1] == ':') {
		return false
	}
	depth := len(segs) - 2 // folders below the top folder that hold the link
	for _, s := range strings.Split(t, "/") {
		switch s {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// fold is the case-insensitive key of a name: simple upper-casing, as NTFS's upcase table does.
func fold(s string) string { return strings.ToUpper(s) }
