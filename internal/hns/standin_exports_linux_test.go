package hns

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/testenv"
)

// TestVmcomputeStandInExports checks the stand-in vmcompute.dll (hack/wine/vmcompute/*.c)
// against the binding list of the hcsshim versions this project links (go.mod, and
// tools/cni's, which win-bridge links): every function it exports is one hcsshim binds from
// vmcompute.dll (its //sys lines), with as many machine-word arguments as mkwinsyscall passes
// (a string is one pointer, a slice a pointer and a length); and the HCS v1 functions
// hcsshim's HotAttachEndpoint and HotDetachEndpoint call are among them. A function hcsshim
// binds and the stand-in lacks fails at the call with ERROR_PROC_NOT_FOUND (mkwinsyscall's
// Find); those are logged. It reads sources only, so it runs on Linux.
func TestVmcomputeStandInExports(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	exports := cExports(t, filepath.Join(root, "hack", "wine", "vmcompute"))
	// hcsshim hnsendpoint.go HotAttachEndpoint/HotDetachEndpoint → OpenContainer
	// (internal/hcs OpenComputeSystem: open, register, properties) → Modify → Close
	// (unregister, close); HNSCall for GetHNSEndpointByID/IsAttached.
	hotAttach := []string{"HcsOpenComputeSystem", "HcsRegisterComputeSystemCallback", "HcsGetComputeSystemProperties",
		"HcsModifyComputeSystem", "HcsUnregisterComputeSystemCallback", "HcsCloseComputeSystem", "HNSCall"}
	for _, name := range hotAttach {
		if _, ok := exports[name]; !ok {
			t.Errorf("the stand-in vmcompute.dll does not export %s, which hcsshim's HotAttachEndpoint calls", name)
		}
	}
	for _, dir := range []string{root, filepath.Join(root, "tools", "cni")} {
		mod := hcsshimDir(t, dir)
		binds := sysBindings(t, mod, "vmcompute")
		t.Logf("%s: hcsshim binds %d vmcompute.dll functions, the stand-in exports %d", mod, len(binds), len(exports))
		for name, n := range exports {
			want, ok := binds[name]
			switch {
			case !ok:
				t.Errorf("%s: the stand-in exports %s, which hcsshim does not bind from vmcompute.dll", mod, name)
			case want != n:
				t.Errorf("%s: the stand-in's %s takes %d arguments; hcsshim passes %d", mod, name, n, want)
			}
		}
		var missing []string
		for name := range binds {
			if _, ok := exports[name]; !ok {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		t.Logf("not exported (a call fails with ERROR_PROC_NOT_FOUND): %s", strings.Join(missing, ", "))
	}
}

// cExports reads the EXPORT'ed functions of a stand-in's C files: name → argument count.
func cExports(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil || len(files) == 0 {
		t.Fatalf("C files in %s: %v", dir, err)
	}
	re := regexp.MustCompile(`EXPORT\s+\w+\s+WINAPI\s+(\w+)\s*\(([^)]*)\)`)
	out := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			params := strings.TrimSpace(m[2])
			n := 0
			if params != "" && params != "void" {
				n = strings.Count(params, ",") + 1
			}
			out[m[1]] = n
		}
	}
	return out
}

// hcsshimDir is the folder of the hcsshim module the Go module in dir requires (downloaded
// through the module proxy if it is not in the cache yet).
func hcsshimDir(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/Microsoft/hcsshim")
	cmd.Dir = dir
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	if err != nil || m.Dir == "" {
		if testenv.InCI() {
			t.Fatalf("hcsshim's module in %s: %v %s", dir, err, m.Error)
		}
		t.Skipf("hcsshim's module in %s is not available: %v %s", dir, err, m.Error)
	}
	return m.Dir
}

// sysBindings reads every //sys line of a module that binds a function of dll: name →
// argument count as mkwinsyscall passes them.
func sysBindings(t *testing.T, mod, dll string) map[string]int {
	t.Helper()
	re := regexp.MustCompile(`^//sys\s+\w+\(([^)]*)\).*=\s*` + regexp.QuoteMeta(dll) + `\.(\w+)\??\s*$`)
	out := map[string]int{}
	err := filepath.WalkDir(mod, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			m := re.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			n := 0
			for _, param := range strings.Split(m[1], ",") {
				f := strings.Fields(param)
				switch {
				case len(f) == 0:
				case len(f) == 2 && strings.HasPrefix(f[1], "[]"):
					n += 2 // a slice: its pointer and its length
				default:
					n++
				}
			}
			out[m[2]] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no //sys line of %s binds %s.dll", mod, dll)
	}
	return out
}
