//go:build windows

package cri

import (
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSymlinkMounts mounts host paths that are symbolic links, made as a CRI client makes them
// on a Windows node (Go's os.Symlink, CreateSymbolicLinkW): a link to a folder, by absolute and
// by relative target, and a link to a single file. containerd's CRI passes the path as given
// and HCS maps the link's target, so the container sees the folder's file and the file's
// content, in both isolations. (Under Wine 8 CreateSymbolicLinkW made nothing, and containerd's
// CRI then created the missing host path as an empty folder; hack/wine/winesymlink.c makes the
// links.)
func TestSymlinkMounts(t *testing.T) {
	for _, c := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}} {
		t.Run(c.name, func(t *testing.T) {
			n := connect(t)
			host := t.TempDir()
			data := filepath.Join(host, "data")
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "in.txt"), []byte("in the linked folder"), 0o644); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(host, "settings.conf")
			if err := os.WriteFile(file, []byte("in the linked file"), 0o644); err != nil {
				t.Fatal(err)
			}
			links := map[string]string{"dir-abs": data, "dir-rel": "data", "file-link": file}
			for link, target := range links {
				if err := os.Symlink(target, filepath.Join(host, link)); err != nil {
					t.Fatalf("os.Symlink(%q, %s): %v", target, link, err)
				}
			}
			// The links go before t.TempDir's RemoveAll, which under Wine 8 would go through
			// a folder link into its target (hack/wine/winesymlink.c); os.Remove deletes a link.
			t.Cleanup(func() {
				for link := range links {
					if err := os.Remove(filepath.Join(host, link)); err != nil {
						t.Errorf("remove the link %s: %v", link, err)
					}
				}
			})

			pod, podCfg := runPodWith(t, n, "pod-symlinks-"+c.name, c.handler)
			for _, m := range []struct{ name, hostPath, containerPath, read, want string }{
				{"dir-abs", filepath.Join(host, "dir-abs"), `C:\abs`, `C:\abs\in.txt`, "in the linked folder"},
				{"dir-rel", filepath.Join(host, "dir-rel"), `C:\rel`, `C:\rel\in.txt`, "in the linked folder"},
				{"file-link", filepath.Join(host, "file-link"), `C:\config\settings.conf`, `C:\config\settings.conf`, "in the linked file"},
			} {
				cfg := containerConfig("read-"+m.name, "read", m.read)
				cfg.Mounts = []*runtimeapi.Mount{{HostPath: m.hostPath, ContainerPath: m.containerPath, Readonly: true}}
				id := startContainer(t, n, pod, podCfg, cfg)
				if s := waitExited(t, n, id); s.GetExitCode() != 0 {
					b, _ := os.ReadFile(filepath.Join(podCfg.LogDirectory, cfg.LogPath))
					t.Fatalf("read %s through the mount of the link %s: exit code %d, message %q, log %q", m.read, m.name, s.GetExitCode(), s.GetMessage(), b)
				}
				// read prints the file as it is, without a newline: containerd tags such a
				// last line P (partial).
				waitLog(t, filepath.Join(podCfg.LogDirectory, cfg.LogPath), " stdout P "+m.want)
			}
			// The links are still links, and the folder they name is untouched.
			if b, err := os.ReadFile(filepath.Join(data, "in.txt")); err != nil || string(b) != "in the linked folder" {
				t.Errorf("the linked folder's file after the pod: %q, %v", b, err)
			}
		})
	}
}
