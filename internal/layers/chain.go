package layers

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
)

// MountType is the rootfs mount type of Windows layers (containerd's windows snapshotter).
const MountType = "windows-layer"

// parentLayerPathsOption prefixes the mount option that carries the parents as a JSON array.
const parentLayerPathsOption = "parentLayerPaths="

// Chain is a container's layers: the writable scratch folder over its parents.
type Chain struct {
	// Scratch is the writable layer folder (for a read-only view, the top layer itself).
	Scratch string `json:"scratch"`
	// Parents are the read-only layer folders, nearest first, base last.
	Parents []string `json:"parents"`
	// ReadOnly is set for a view ("ro" mount option).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// FromMounts reads the chain from a task create request's rootfs mounts. It accepts exactly
// one mount of type windows-layer; none at all returns (nil, nil) so the caller can fall back
// to the spec's LayerFolders.
func FromMounts(mounts []*types.Mount) (*Chain, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	if len(mounts) > 1 {
		return nil, fmt.Errorf("rootfs: %d mounts given, want exactly one %q mount: %w", len(mounts), MountType, errdefs.ErrInvalidArgument)
	}
	m := mounts[0]
	if m.Type != MountType {
		return nil, fmt.Errorf("rootfs: mount type %q is not supported, want %q: %w", m.Type, MountType, errdefs.ErrInvalidArgument)
	}
	if m.Source == "" {
		return nil, fmt.Errorf("rootfs: %q mount has no source (the scratch layer folder): %w", MountType, errdefs.ErrInvalidArgument)
	}
	c := &Chain{Scratch: m.Source}
	for _, o := range m.Options {
		switch {
		case o == "ro":
			c.ReadOnly = true
		case o == "rw":
		case strings.HasPrefix(o, parentLayerPathsOption):
			raw := strings.TrimPrefix(o, parentLayerPathsOption)
			if err := json.Unmarshal([]byte(raw), &c.Parents); err != nil {
				return nil, fmt.Errorf("rootfs: mount option %s%s: not a JSON array of paths: %v: %w", parentLayerPathsOption, raw, err, errdefs.ErrInvalidArgument)
			}
		}
	}
	for i, p := range c.Parents {
		if p == "" {
			return nil, fmt.Errorf("rootfs: parentLayerPaths[%d] is empty: %w", i, errdefs.ErrInvalidArgument)
		}
	}
	return c, nil
}

// FromLayerFolders reads the chain from spec.Windows.LayerFolders. The runtime spec orders them
// "from topmost layer to base layer" (config-windows.md); hcsshim and containerd append the
// container's scratch folder last (hcsshim builds the list from a windows-layer mount as
// parentLayerPaths followed by the mount's source).
func FromLayerFolders(folders []string) (*Chain, error) {
	if len(folders) == 0 {
		return nil, nil
	}
	if len(folders) < 2 {
		return nil, fmt.Errorf("windows.layerFolders: %d folder(s), want at least a base layer and a scratch folder: %w", len(folders), errdefs.ErrInvalidArgument)
	}
	for i, f := range folders {
		if f == "" {
			return nil, fmt.Errorf("windows.layerFolders[%d] is empty: %w", i, errdefs.ErrInvalidArgument)
		}
	}
	return &Chain{
		Scratch: folders[len(folders)-1],
		Parents: append([]string(nil), folders[:len(folders)-1]...),
	}, nil
}

// LayerFolders returns the chain in the runtime spec's order: topmost parent first, base,
// then the scratch.
func (c *Chain) LayerFolders() []string {
	return append(append([]string(nil), c.Parents...), c.Scratch)
}
