package hostprocess

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
)

// Annotation names, as hcsshim publishes them (pkg/annotations/annotations.go), repeated here
// for the errors this package writes; internal/oci owns their parsing.
const (
	annotationRootfsLocation = "microsoft.com/hostprocess-rootfs-location"
)

// DefaultRoot is where the containers' files appear on the host, each in a folder named by
// its id: hcsshim's location when the bind filter cannot scope a binding to the container
// (internal/jobcontainers/storage.go: fallbackRootfsFormat `C:\hpc\%s\`). runhcs binds
// host-wide (silos are undocumented), so it is always that form.
const DefaultRoot = `C:\hpc`

// MountPointVariable is the environment variable every process of a HostProcess container
// gets, naming where its files are (hcsshim: sandboxMountPointEnvVar; documented by
// Kubernetes' "Create a Windows HostProcess Pod", Volume mounts).
const MountPointVariable = "CONTAINER_SANDBOX_MOUNT_POINT"

// RootfsLocation is where container id's files appear on the host, with a trailing
// backslash: DefaultRoot\id\, or custom\id\ when the annotation
// microsoft.com/hostprocess-rootfs-location names a folder (hcsshim's reading without a silo:
// "the location will be C:\<path-supplied>\<containerID>").
func RootfsLocation(id, custom string) (string, error) {
	root := DefaultRoot
	if custom != "" {
		c := strings.ReplaceAll(custom, "/", `\`)
		if !isDrivePath(c) || hasDotDot(c) {
			return "", fmt.Errorf("annotation %s=%q: want an absolute path with a drive letter (C:\\…) and no \"..\": %w", annotationRootfsLocation, custom, errdefs.ErrInvalidArgument)
		}
		root = strings.TrimRight(c, `\`)
	}
	if id == "" || strings.ContainsAny(id, `\/:*?"<>|`) {
		return "", fmt.Errorf("container id %q cannot name a folder: %w", id, errdefs.ErrInvalidArgument)
	}
	return root + `\` + id + `\`, nil
}

// MountPath is where a volume mount of destination appears for a container whose files are
// at location: under it, as hcsshim places mounts without a silo (mounts.go:
// fallbackMountSetup, "C:\path\in\container would end up being placed at
// C:\<rootfslocation>\path\in\container").
func MountPath(location, destination string) (string, error) {
	d := strings.ReplaceAll(destination, "/", `\`)
	if len(d) >= 2 && d[1] == ':' {
		d = d[2:]
	}
	d = strings.Trim(d, `\`)
	if d == "" || hasDotDot(d) || strings.HasPrefix(destination, `\\`) {
		return "", fmt.Errorf("destination %q: want a folder path below the drive's root, without \"..\": %w", destination, errdefs.ErrInvalidArgument)
	}
	return location + d, nil
}

// ExpandMountPoint replaces %CONTAINER_SANDBOX_MOUNT_POINT% and
// $env:CONTAINER_SANDBOX_MOUNT_POINT in s with location (without its trailing backslash), as
// hcsshim does for the command line, the working directory and the environment
// (jobcontainer.go: replaceWithMountPoint); changed says whether s used it.
func ExpandMountPoint(s, location string) (_ string, changed bool) {
	loc := strings.TrimSuffix(location, `\`)
	out := strings.ReplaceAll(s, "%"+MountPointVariable+"%", loc)
	out = strings.ReplaceAll(out, "$env:"+MountPointVariable, loc)
	return out, out != s
}

// WorkingDir is the working directory of a process asking for dir in a container whose files
// are at location: the location itself when dir is empty; dir with the variable expanded;
// DefaultRoot and folders below it (containerd's CRI gives C:\hpc to a HostProcess container
// whose image names none: internal/cri/server/container_create.go) mapped to the same folders
// below location, where the files are; any other absolute path as it is, a host folder, as
// hcsshim treats it when the container's files have a fixed place; and a relative path below
// location.
func WorkingDir(dir, location string) string {
	if dir == "" {
		return location
	}
	if d, changed := ExpandMountPoint(dir, location); changed {
		return d
	}
	d := strings.ReplaceAll(dir, "/", `\`)
	lower := strings.ToLower(d)
	root := strings.ToLower(DefaultRoot)
	switch {
	case lower == root || lower == root+`\`:
		return location
	case strings.HasPrefix(lower, root+`\`):
		return location + d[len(root)+1:]
	case isDrivePath(d):
		return d
	}
	return location + strings.TrimLeft(d, `\`)
}

// Environment is what a process of the container gets beside its token's default environment:
// the spec's variables with the mount point expanded, then CONTAINER_SANDBOX_MOUNT_POINT.
func Environment(env map[string]string, location string) []string {
	out := make([]string, 0, len(env)+1)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v, _ := ExpandMountPoint(env[k], location)
		out = append(out, k+"="+v)
	}
	return append(out, MountPointVariable+"="+location)
}

func isDrivePath(p string) bool {
	return len(p) >= 3 && p[1] == ':' && p[2] == '\\' && (p[0]|0x20) >= 'a' && (p[0]|0x20) <= 'z'
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, `\`) {
		if part == ".." {
			return true
		}
	}
	return false
}

// PathSuffix is what a process's PATH gets appended, as hcsshim appends it
// (jobcontainer.go: CreateProcess): the container's files, so that the image's programs are
// found by name, and Windows PowerShell's and WMI's folders, which images that change PATH
// tend to drop.
func PathSuffix(location string) []string {
	return []string{location, `C:\WINDOWS\System32\WindowsPowerShell\v1.0\`, `C:\WINDOWS\System32\Wbem`}
}
