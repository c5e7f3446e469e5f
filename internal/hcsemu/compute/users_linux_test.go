package compute

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

func TestLookupAccount(t *testing.T) {
	for _, tc := range []struct{ user, name string }{
		{"", "ContainerAdministrator"},
		{"ContainerUser", "ContainerUser"},
		{"containeruser", "ContainerUser"},
		{`User Manager\ContainerAdministrator`, "ContainerAdministrator"},
		{`NT AUTHORITY\SYSTEM`, "SYSTEM"},
		{`nt authority\network service`, "NETWORK SERVICE"},
		{"LOCAL SERVICE", "LOCAL SERVICE"},
	} {
		a, err := lookupAccount(tc.user)
		if err != nil || a.Name != tc.name {
			t.Errorf("lookupAccount(%q) = %+v, %v; want %s", tc.user, a, err, tc.name)
		}
	}
	for _, bad := range []string{"nobody", `NT AUTHORITY\ContainerUser`, `User Manager\SYSTEM`, "1000:1000", `\ContainerUser`} {
		_, err := lookupAccount(bad)
		if !errors.Is(err, computecore.E_LOGON_FAILURE) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("lookupAccount(%q) = %v, want ERROR_LOGON_FAILURE naming it", bad, err)
		}
	}
	seen := map[uint32]string{}
	for _, a := range accounts {
		if other, dup := seen[a.UID]; dup {
			t.Errorf("%s and %s share uid %d", a.Name, other, a.UID)
		}
		seen[a.UID] = a.Name
	}
}

// TestDaemonUsers runs processes as the container's accounts: each runs under its own uid, sees
// its Windows environment, and only administrators write the layers' files.
func TestDaemonUsers(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	cs, vol := createSystem(t, api, "users", "", true)
	// The layers' files: owned by uid 0, readable by everyone (newVolume's are 0755 folders);
	// the root itself as a layer's C:\ is.
	if err := os.Chmod(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(vol, "Users"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	out := func(user, args string) (string, uint32) {
		t.Helper()
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " " + args, User: user, CreateStdOutPipe: true})
		o := readAll(t, s.stdout)
		return o, s.exitCode(t)
	}

	for _, tc := range []struct {
		user, whoami string
		admin        bool
	}{
		{"", "user=User Manager\\ContainerAdministrator\nuid=0 gid=0\n", true},
		{"ContainerUser", "user=User Manager\\ContainerUser\nuid=1000 gid=545\n", false},
		{`NT AUTHORITY\SYSTEM`, "user=NT AUTHORITY\\SYSTEM\nuid=18 gid=0\n", true},
		{`NT AUTHORITY\LOCAL SERVICE`, "user=NT AUTHORITY\\LOCAL SERVICE\nuid=19 gid=545\n", false},
		{`NT AUTHORITY\NETWORK SERVICE`, "user=NT AUTHORITY\\NETWORK SERVICE\nuid=20 gid=545\n", false},
	} {
		t.Run(strings.ReplaceAll(tc.user+"_", `\`, "_"), func(t *testing.T) {
			if got, code := out(tc.user, "whoami"); got != tc.whoami || code != 0 {
				t.Errorf("whoami = %q (exit %d), want %q", got, code, tc.whoami)
			}
			// Only administrators may write a layer's folder.
			_, code := out(tc.user, `write C:\workload\by-`+strings.ReplaceAll(strings.ReplaceAll(tc.user, `\`, "_"), " ", "_")+` x`)
			if (code == 0) != tc.admin {
				t.Errorf("write into C:\\workload: exit %d, want success only for an administrator (%v)", code, tc.admin)
			}
			a, _ := lookupAccount(tc.user)
			got, _ := out(tc.user, "env USERPROFILE TEMP APPDATA LOCALAPPDATA")
			want := "USERPROFILE=" + a.Profile + "\nTEMP=" + a.Profile + `\AppData\Local\Temp` + "\nAPPDATA=" + a.Profile + `\AppData\Roaming` +
				"\nLOCALAPPDATA=" + a.Profile + `\AppData\Local` + "\n"
			if got != want {
				t.Errorf("env = %q, want %q", got, want)
			}
			if a.UID == 0 {
				return
			}
			// Everyone may write its own profile, which the first logon made.
			if _, code := out(tc.user, `write `+a.Profile+`\AppData\Local\Temp\mine x`); code != 0 {
				t.Errorf("write into its TEMP: exit %d", code)
			}
			fi, err := os.Stat(filepath.Join(vol, strings.ReplaceAll(strings.TrimPrefix(a.Profile, `C:\`), `\`, "/"), "AppData/Local/Temp/mine"))
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != a.UID {
				t.Errorf("its file is owned by uid %d, want %d", st.Uid, a.UID)
			}
		})
	}

	t.Run("the process's Environment wins", func(t *testing.T) {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " env USERNAME", User: "ContainerUser",
			Environment: map[string]string{"USERNAME": "override"}, CreateStdOutPipe: true})
		if got := readAll(t, s.stdout); got != "USERNAME=override\n" {
			t.Errorf("env = %q", got)
		}
		s.exitCode(t)
	})
	t.Run("unknown user", func(t *testing.T) {
		_, err := startProcess(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " whoami", User: "nobody"})
		if !errors.Is(err, computecore.E_LOGON_FAILURE) {
			t.Fatalf("create process as nobody: %v, want ERROR_LOGON_FAILURE", err)
		}
	})
}
