package emuvhdx

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"testing"
)

func TestVHDXFileSystemDir(t *testing.T) {
	disk := filepath.Join("/s", "snap", "sandbox.vhdx")
	abs := "/etc"
	if runtime.GOOS == "windows" {
		abs = `C:\etc`
	}
	for _, tc := range []struct {
		fs, want string
		ok       bool
	}{
		{"", disk + FSSuffix, true},
		{".", filepath.Join("/s", "snap"), true},
		{"vm", filepath.Join("/s", "snap", "vm"), true},
		{"..", "", false},
		{"../other", "", false},
		{abs, "", false},
	} {
		var h Header
		if err := json.Unmarshal(Encode(1, tc.fs), &h); err != nil || h.Format != Format || h.VirtualSize != 1 || h.FileSystem != tc.fs {
			t.Fatalf("Encode(1, %q) decodes to %+v, %v", tc.fs, h, err)
		}
		got, err := h.FileSystemDir(disk)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("FileSystem %q: %q, %v; want %q (ok %v)", tc.fs, got, err, tc.want, tc.ok)
		}
	}
}
