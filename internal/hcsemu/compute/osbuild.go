package compute

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// osBuildFile is where an OS file tree (a layer's Files/, a container's C:\, a utility VM's
// UtilityVM/Files/) records its Windows build: the emulator's convention, which test/image writes
// (image.OSBuildFile). Windows records the build in the SOFTWARE hive, which the emulator cannot
// read; see docs/emulator.md ("OS builds").
const osBuildFile = "Windows/System32/hcsemu-osbuild.txt"

// osBuild is a Windows build as "major.minor.build.revision"; major.minor and build decide
// compatibility (VirtDocs version-compatibility: images are matched by build, e.g. 17763, 20348;
// revisions need not match since 1809).
type osBuild struct {
	Version      string // as recorded
	Major, Minor uint32
	Build        uint32
}

// The Long-Term Servicing Channel builds from which on a host also runs the previous LTSC's
// images process-isolated, in ascending order: Windows Server 2022 (20348) and 2025 (26100).
var compatLTSCBuilds = []uint32{20348, 26100}

// processIsolationRuns says whether a host of build host runs an image of build img in process
// isolation, as Microsoft's compatibility tables say (VirtDocs windowscontainers/deploy-containers/
// version-compatibility.md: "Windows Server containers are blocked from starting when the build
// number between the container host and the container image are different", with the exception
// of Windows Server 2022 images on later hosts: a 2025 host runs 2022 images process-isolated, a
// Windows 11 host 2022 ones). It is the rule containerd's Windows platform matcher applies to
// os.version at pull time (github.com/containerd/platforms platform_windows_compat.go,
// checkWindowsHostAndContainerCompat) and hcsshim's osversion.CheckHostAndContainerCompat.
func processIsolationRuns(host, img osBuild) bool {
	if host.Major != img.Major || host.Minor != img.Minor {
		return false
	}
	if host.Build < compatLTSCBuilds[0] {
		return host.Build == img.Build
	}
	// The earliest image a host runs: the latest LTSC before the host's build (a 2022 host
	// itself: only 2022 images).
	earliest := compatLTSCBuilds[0]
	for i := len(compatLTSCBuilds) - 1; i >= 0; i-- {
		if host.Build > compatLTSCBuilds[i] {
			earliest = compatLTSCBuilds[i]
			break
		}
	}
	return earliest <= img.Build && img.Build <= host.Build
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
	major, _ := strconv.ParseUint(parts[0], 10, 32)
	minor, _ := strconv.ParseUint(parts[1], 10, 32)
	b, _ := strconv.ParseUint(parts[2], 10, 32)
	return osBuild{Version: v, Major: uint32(major), Minor: uint32(minor), Build: uint32(b)}, nil
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
		return osBuild{}, false, hresult.Errorf(computecore.HCS_E_INVALID_LAYER, "%s: %q: %v", filepath.Join(root, osBuildFile), strings.TrimSpace(line), err)
	}
	return b, true, nil
}
