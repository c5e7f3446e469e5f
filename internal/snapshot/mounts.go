package snapshot

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
)

const (
	// MountType is the mount type of Windows layers, as containerd's windows snapshotter
	// emits it.
	MountType = "windows-layer"
	// parentLayerPathsFlag prefixes the JSON array of parent folders in a mount's options;
	// containerd's core/mount.ParentLayerPathsFlag (defined only in its Windows build).
	parentLayerPathsFlag = "parentLayerPaths="
)

// layerMounts builds the mounts of a snapshot exactly as containerd's windows snapshotter's
// mounts(): options are "ro" for a view, else "rw", then parentLayerPaths= with the parents
// marshalled by encoding/json, only when there are parents.
func layerMounts(source string, parents []string, view bool) []mount.Mount {
	flag := "rw"
	if view {
		flag = "ro"
	}
	options := []string{flag}
	if len(parents) != 0 {
		// A []string always marshals.
		b, _ := json.Marshal(parents)
		options = append(options, parentLayerPathsFlag+string(b))
	}
	return []mount.Mount{{Source: source, Type: MountType, Options: options}}
}

// LayerMount is a parsed windows-layer mount.
type LayerMount struct {
	Source   string
	Parents  []string
	ReadOnly bool
}

// ParseMounts reads the one windows-layer mount of a snapshot. Anything else is
// errdefs.ErrNotImplemented: it belongs to another differ.
func ParseMounts(mounts []mount.Mount) (LayerMount, error) {
	if len(mounts) != 1 || mounts[0].Type != MountType {
		types := make([]string, 0, len(mounts))
		for _, m := range mounts {
			types = append(types, m.Type)
		}
		return LayerMount{}, fmt.Errorf("mounts of types %v are not one %s mount: %w", types, MountType, errdefs.ErrNotImplemented)
	}
	m := mounts[0]
	lm := LayerMount{Source: m.Source}
	for _, o := range m.Options {
		switch {
		case o == "ro":
			lm.ReadOnly = true
		case o == "rw":
			lm.ReadOnly = false
		case strings.HasPrefix(o, parentLayerPathsFlag):
			if err := json.Unmarshal([]byte(o[len(parentLayerPathsFlag):]), &lm.Parents); err != nil {
				return LayerMount{}, fmt.Errorf("mount option %q of %s: %w: %w", o, m.Source, err, errdefs.ErrInvalidArgument)
			}
		}
	}
	if lm.Source == "" {
		return LayerMount{}, fmt.Errorf("%s mount without a source: %w", MountType, errdefs.ErrInvalidArgument)
	}
	return lm, nil
}
