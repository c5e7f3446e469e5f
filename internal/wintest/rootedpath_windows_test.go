package wintest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

// fullPathName is GetFullPathNameW's answer for p.
func fullPathName(t *testing.T, p string) string {
	t.Helper()
	u, err := windows.UTF16PtrFromString(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]uint16, 1024)
	n, err := windows.GetFullPathName(u, uint32(len(buf)), &buf[0], nil)
	if err != nil {
		t.Fatalf("GetFullPathNameW(%s): %v", p, err)
	}
	return windows.UTF16ToString(buf[:n])
}

// TestRootedPathOnCurrentDrive: a path that begins with a single separator, / as well as \, is
// relative to the root of the current drive (Microsoft, "Naming Files, Paths, and Namespaces"):
// with the current folder on C:, GetFullPathNameW and filepath.Abs answer C:\…, and
// CreateDirectoryW (os.MkdirAll), CreateFileW (os.Create) and FindFirstFileW make and find the
// files there, and GetNamedSecurityInfoW and SetNamedSecurityInfoW find the folder (advapi32's,
// which kubelet.exe calls on /var/log/pods). Under Wine (hack/wine/winepath.c) such a path once reached the Linux machine
// (Z:\…): this checks that nothing appears there, both for a path whose Linux folder exists
// (/tmp) and for one whose does not.
func TestRootedPathOnCurrentDrive(t *testing.T) {
	cwd := t.TempDir()
	drive := filepath.VolumeName(cwd)
	if len(drive) != 2 || drive[1] != ':' {
		t.Skipf("the temporary folder %s is not on a drive letter", cwd)
	}
	t.Chdir(cwd)
	name := fmt.Sprintf("runhcs-rooted-%d", os.Getpid())
	for _, rooted := range []string{"/tmp/" + name + "/sub", "/" + name + "/sub", `\` + name + `\sub`} {
		top := strings.SplitN(strings.TrimLeft(filepath.FromSlash(rooted), `\`), `\`, 2)[0]
		if top == "tmp" {
			top = `tmp\` + name
		}
		onDrive := drive + `\` + top
		t.Cleanup(func() { os.RemoveAll(onDrive) })
		want := drive + filepath.FromSlash(strings.ReplaceAll(rooted, `\`, "/"))

		if got := fullPathName(t, rooted); got != want {
			t.Errorf("GetFullPathNameW(%s) = %s, want %s (the current drive's root)", rooted, got, want)
		}
		if got, err := filepath.Abs(rooted); err != nil || got != want {
			t.Errorf("filepath.Abs(%s) = %s, %v; want %s", rooted, got, err, want)
		}
		if err := os.MkdirAll(rooted, 0o755); err != nil {
			t.Fatalf("os.MkdirAll(%s): %v", rooted, err)
		}
		// kubelet.exe's MkdirAll of /var/log/pods: the folder it made, then its security
		// descriptor read and written by name (advapi32, not kernelbase).
		const info = windows.DACL_SECURITY_INFORMATION | windows.OWNER_SECURITY_INFORMATION | windows.GROUP_SECURITY_INFORMATION
		if sd, err := windows.GetNamedSecurityInfo(rooted, windows.SE_FILE_OBJECT, info); err != nil {
			t.Errorf("GetNamedSecurityInfoW(%s) after os.MkdirAll: %v", rooted, err)
		} else if dacl, _, err := sd.DACL(); err != nil {
			t.Errorf("the DACL of %s: %v", rooted, err)
		} else if err := windows.SetNamedSecurityInfo(rooted, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
			t.Errorf("SetNamedSecurityInfoW(%s): %v", rooted, err)
		}
		f, err := os.Create(rooted + "/file")
		if err != nil {
			t.Fatalf("os.Create(%s/file): %v", rooted, err)
		}
		f.Close()
		if _, err := os.Stat(want + `\file`); err != nil {
			t.Errorf("%s/file is not at %s: %v", rooted, want+`\file`, err)
		}
		var data windows.Win32finddata
		pattern, _ := windows.UTF16PtrFromString(rooted + "/*")
		h, err := windows.FindFirstFile(pattern, &data)
		if err != nil {
			t.Errorf("FindFirstFileW(%s/*): %v", rooted, err)
		} else {
			var names []string
			for {
				names = append(names, windows.UTF16ToString(data.FileName[:]))
				if windows.FindNextFile(h, &data) != nil {
					break
				}
			}
			windows.FindClose(h)
			if !strings.Contains(strings.Join(names, " "), "file") {
				t.Errorf("FindFirstFileW(%s/*) lists %v, want file", rooted, names)
			}
		}
		if UnderWine() && drive != "Z:" {
			// Wine shows the Linux machine's root as Z:.
			if _, err := os.Stat(`Z:\` + top); err == nil {
				os.RemoveAll(`Z:\` + top)
				t.Errorf("%s was made on the Linux machine (Z:\\%s)", rooted, top)
			}
		}
	}
	// A drive-absolute path is what it says, and under Wine Z:\ stays the Linux root.
	if UnderWine() {
		if got := fullPathName(t, `Z:\tmp`); got != `Z:\tmp` {
			t.Errorf("GetFullPathNameW(Z:\\tmp) = %s", got)
		}
		if fi, err := os.Stat(`Z:\tmp`); err != nil || !fi.IsDir() {
			t.Errorf("Z:\\tmp (the Linux /tmp): %v", err)
		}
	}
}
