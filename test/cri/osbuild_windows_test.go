//go:build windows

package cri

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Process isolation's build rule through CRI (issue 13). The node is Windows Server 2022 (build
// 20348: hcsemu's --os-version and the build its Wine prefix reports). Where each kind of image
// is refused:
//   - An image index (as Microsoft publishes its images) whose only entry's os.version names
//     another build never reaches the runtime: containerd's CRI pulls for its default platform
//     (v2.4.2 internal/cri/server/images/image_pull.go, transferimage.WithPlatforms(
//     platforms.DefaultSpec()); 1.7.35 likewise), whose Windows matcher keeps only the
//     os.versions the host runs (github.com/containerd/platforms platform_windows_compat.go, the
//     table Microsoft publishes), so PullImage fails with "no match for platform in manifest",
//     for both handlers (no per-handler platform is configured: runtime_platforms).
//   - A single manifest is not filtered at pull (the filter applies to an index's entries; the
//     unpacker only skips unpacking a config of another platform), nor is an image that
//     declares no os.version (the matcher accepts one without): such an image of another build
//     is pulled, and CreateContainer succeeds:
//     containerd's CRI only records the container and its spec, and makes the task, which is
//     when the runtime first sees anything, in StartContainer (v2.4.2
//     internal/cri/server/container_start.go, container.NewTask). The spec carries no os.version
//     either (containerd gives the shim no image config), so the refusal is HCS's, at the
//     compute system's create: StartContainer fails with HCS_E_IMAGE_MISMATCH, which the shim
//     explains naming the host's build (and the emulator, the image's). CreateContainer cannot
//     fail for it without a change in containerd.
//   - Hyper-V isolation runs that image: its utility VM (from the 2022 pause image) is newer.
const (
	otherBuild           = "10.0.17763.1"
	hostBuild            = "10.0.20348.1"
	otherBuildImage      = "docker.io/runhcs/test-ltsc2019:latest"
	undeclaredBuildImage = "docker.io/runhcs/test-ltsc2019-undeclared:latest"
)

func TestImageBuildRule(t *testing.T) {
	n := connect(t)

	t.Run("an image of another os.version is not pulled", func(t *testing.T) {
		for i, handler := range []string{"", hypervHandler} {
			_, podCfg := runPodWith(t, n, fmt.Sprintf("pod-build-pull-%d", i), handler)
			cfg := containerConfig("other-build", "echo", "never")
			cfg.Image.Image = otherBuildImage
			_, err := n.img.PullImage(ctx(t), cfg.Image, nil, podCfg)
			if err == nil || !strings.Contains(err.Error(), "no match for platform") {
				t.Errorf("PullImage %s (os.version %s) on a %s node, handler %q: %v; want no match for platform", otherBuildImage, otherBuild, hostBuild, handler, err)
			}
		}
	})

	t.Run("process isolation refuses an undeclared other build in StartContainer", func(t *testing.T) {
		pod, podCfg := runPod(t, n, "pod-build-proc")
		cfg := containerConfig("undeclared-build", "echo", "never")
		cfg.Image.Image = undeclaredBuildImage
		if _, err := n.img.PullImage(ctx(t), cfg.Image, nil, podCfg); err != nil {
			t.Fatalf("PullImage %s (no os.version): %v", undeclaredBuildImage, err)
		}
		id, err := n.rt.CreateContainer(ctx(t), pod, cfg, podCfg)
		if err != nil {
			t.Fatalf("CreateContainer: %v (containerd makes no task here)", err)
		}
		removeAtEnd(t, n, id)
		err = n.rt.StartContainer(ctx(t), id)
		if err == nil {
			t.Fatal("StartContainer succeeded")
		}
		for _, want := range []string{"0x80370101", "build " + otherBuild, "host: " + hostBuild, "runhcs-wcow-hypervisor"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("StartContainer = %v; want it to name %q", err, want)
			}
		}
		if systems := computeSystems(t); containsPrefix(systems, id) {
			t.Errorf("compute systems after a refused start: %v; want none of %s", systems, id)
		}
	})

	t.Run("Hyper-V isolation runs it", func(t *testing.T) {
		pod, podCfg := runPodWith(t, n, "pod-build-hv", hypervHandler)
		cfg := containerConfig("undeclared-build-hv", "echo", "an older build in a utility VM")
		cfg.Image.Image = undeclaredBuildImage
		id := startContainer(t, n, pod, podCfg, cfg)
		if s := waitExited(t, n, id); s.GetExitCode() != 0 {
			t.Fatalf("exit code %d, reason %q, message %q; want 0", s.GetExitCode(), s.GetReason(), s.GetMessage())
		}
		waitLog(t, filepath.Join(podCfg.LogDirectory, cfg.LogPath), " stdout F an older build in a utility VM")
	})
}
