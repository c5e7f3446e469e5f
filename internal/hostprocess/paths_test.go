package hostprocess

import (
	"slices"
	"testing"

	"github.com/containerd/errdefs"
)

func TestRootfsLocation(t *testing.T) {
	for _, c := range []struct {
		id, custom, want string
		bad              bool
	}{
		{"c1", "", `C:\hpc\c1\`, false},
		{"c1", `D:\agents\`, `D:\agents\c1\`, false},
		{"c1", `D:/agents`, `D:\agents\c1\`, false},
		{"c1", `agents`, "", true},
		{"c1", `C:\a\..\b`, "", true},
		{`..\x`, "", "", true},
	} {
		got, err := RootfsLocation(c.id, c.custom)
		if c.bad {
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("RootfsLocation(%q, %q) = %q, %v; want invalid", c.id, c.custom, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("RootfsLocation(%q, %q) = %q, %v; want %q", c.id, c.custom, got, err, c.want)
		}
	}
}

func TestMountPath(t *testing.T) {
	loc := `C:\hpc\c1\`
	for dest, want := range map[string]string{`C:\logs`: `C:\hpc\c1\logs`, `c:\var\lib\x\`: `C:\hpc\c1\var\lib\x`, `/data`: `C:\hpc\c1\data`} {
		if got, err := MountPath(loc, dest); err != nil || got != want {
			t.Errorf("MountPath(%q) = %q, %v; want %q", dest, got, err, want)
		}
	}
	for _, dest := range []string{`C:\`, `C:\..\Windows`, `\\.\pipe\x`, ``} {
		if got, err := MountPath(loc, dest); !errdefs.IsInvalidArgument(err) {
			t.Errorf("MountPath(%q) = %q, %v; want invalid", dest, got, err)
		}
	}
}

func TestWorkingDirAndExpansion(t *testing.T) {
	loc := `C:\hpc\c1\`
	for dir, want := range map[string]string{
		``:                                       loc,
		`C:\hpc`:                                 loc,
		`c:\HPC\bin`:                             `C:\hpc\c1\bin`,
		`%CONTAINER_SANDBOX_MOUNT_POINT%\bin`:    `C:\hpc\c1\bin`,
		`$env:CONTAINER_SANDBOX_MOUNT_POINT\bin`: `C:\hpc\c1\bin`,
		`C:\Windows\Temp`:                        `C:\Windows\Temp`,
		`work`:                                   `C:\hpc\c1\work`,
	} {
		if got := WorkingDir(dir, loc); got != want {
			t.Errorf("WorkingDir(%q) = %q, want %q", dir, got, want)
		}
	}
	env := Environment(map[string]string{"B": `%CONTAINER_SANDBOX_MOUNT_POINT%\conf`, "A": "1"}, loc)
	if want := []string{"A=1", `B=C:\hpc\c1\conf`, `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\`}; !slices.Equal(env, want) {
		t.Errorf("Environment = %q, want %q", env, want)
	}
}

func TestCPUConversions(t *testing.T) {
	// count*10000/processors, at least 1 and at most 10000; weight 1..10000 → 1..9.
	for _, c := range []struct{ count, procs, want uint32 }{{1, 16, 625}, {2, 4, 5000}, {8, 4, 10000}, {1, 20000, 1}} {
		if got := CPURate(c.count, c.procs); got != c.want {
			t.Errorf("CPURate(%d, %d) = %d, want %d", c.count, c.procs, got, c.want)
		}
	}
	for w, want := range map[uint32]uint32{0: 0, 1: 1, 5000: 5, 10000: 9} {
		if got := CPUWeight(w); got != want {
			t.Errorf("CPUWeight(%d) = %d, want %d", w, got, want)
		}
	}
}
