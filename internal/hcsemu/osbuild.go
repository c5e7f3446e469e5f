package hcsemu

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/openhcs/runhcs/internal/computecore"
)

// osBuildFile is where an OS file tree (a layer's Files/, a container's C:\, a utility VM's
// UtilityVM/Files/) records its Windows build: the emulator's convention, which test/image writes
// (image.OSBuildFile). Windows records the build in the SOFTWARE hive, which the emulator cannot
// read; see doc.go.
const osBuildFile = "Windows/System32/hcsemu-osbuild.txt"

// osBuild is a Windows build as "major.minor.build.revision"; only build decides compatibility
// (VirtDocs version-compatibility: images are matched by build, e.g. 17763, 20348).
type osBuild struct {
	Version string // as recorded
	Build   uint32
}

// parseOSBuild parses "10.0.20348.1" (the revision may be missing).
func parseOSBuild(v string) (osBuild, error) {
	v = strings.TrimSpace(v)
	parts := strings.Split(v, ".")
	if len(parts) < 3 || len(parts) > 4 {
		return osBuild{}, errors.New("not major.minor.build[.revision]")
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return osBuild{}, errors.New("not major.minor.build[.revision]")
		}
	}
	b, _ := strconv.ParseUint(parts[2], 10, 32)
	return osBuild{Version: v, Build: uint32(b)}, nil
}

// readOSBuild reads the build an OS file tree rooted at root records. ok is false when it
// records none (a layer of an unknown build: no check is made for it).
func readOSBuild(root string) (b osBuild, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(root, osBuildFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return osBuild{}, false, nil
	}
	if err != nil {
		return osBuild{}, false, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	b, err = parseOSBuild(line)
	if err != nil {
		return osBuild{}, false, errorf(computecore.HCS_E_INVALID_LAYER, "%s: %q: %v", filepath.Join(root, osBuildFile), strings.TrimSpace(line), err)
	}
	return b, true, nil
}
