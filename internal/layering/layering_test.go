package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/openhcs/runhcs"

// rules lists, for each runhcs package (relative to the module), the runhcs packages its
// non-test files may import, for any GOOS. Top of the stack first; see DESIGN.md and each
// package's doc.go, which say the same in prose.
var rules = map[string][]string{
	// The programs: thin mains over their package.
	"cmd/containerd-shim-runhcs-v1":   {"internal/shim"},
	"cmd/containerd-wcow-snapshotter": {"internal/snapshot", "internal/wclayer"},
	"cmd/hcsemu":                      {"internal/computecore", "internal/hcsemu", "internal/hcsemu/client", "internal/hcsemu/wire"},
	"cmd/shimdiag":                    {"protocols/diag"},

	// The shim: the service, then the lifecycle packages under it.
	"internal/shim": {"internal/atomicfile", "internal/computecore", "internal/hcs", "internal/hcs/schema2",
		"internal/hostprocess", "internal/layers", "internal/oci", "internal/shim/pod", "internal/shim/sandbox", "internal/shim/stdio",
		"internal/shim/task", "internal/uvm", "protocols/diag", "protocols/options", "protocols/stats"},
	// The pod a shim serves: its tasks (one type per kind), its isolation, its VM and its rules.
	"internal/shim/pod": {"internal/oci", "internal/shim/sandbox", "internal/shim/task", "internal/uvm"},
	// A sandbox served through containerd's sandbox API: its states and its record on disk; the
	// pod it owns arrives as an interface from internal/shim.
	"internal/shim/sandbox": {"internal/atomicfile", "protocols/stats"},
	"internal/shim/task": {"internal/atomicfile", "internal/hcs", "internal/hcs/schema2", "internal/hostprocess", "internal/hns",
		"internal/hns/hcn", "internal/layers", "internal/oci", "internal/shim/stdio", "internal/uvm",
		"protocols/options", "protocols/stats"},
	"internal/shim/stdio": nil,
	// The host side of HostProcess containers: job objects, accounts, the bind filter, one
	// interface, a Windows implementation and a Linux one (cgroups as jobs, the emulator's
	// accounts, the emulated host's namespace from hcsemu's layout); a leaf beside
	// internal/computecore.
	"internal/hostprocess": {"internal/cgroup1", "internal/hcs/schema2", "internal/hcsemu/layout", "internal/winargs",
		"internal/winlinux"},
	"internal/uvm": {"internal/hcs", "internal/hcs/schema2", "internal/hns", "internal/hns/hcn", "internal/oci",
		"protocols/stats"},
	"internal/oci": {"internal/computenetwork", "internal/hcs/schema2", "internal/winargs", "protocols/options"},

	// Storage: the snapshotter and the layer mounts on the Windows layer format, which is a leaf.
	"internal/snapshot": {"internal/emuvhdx", "internal/wclayer"},
	"internal/layers":   {"internal/wclayer"},
	"internal/wclayer":  nil,

	// The typed clients of HCS and HNS, over the bare API surfaces; off Windows they choose the
	// emulator's client.
	"internal/hcs":            {"internal/computecore", "internal/hcs/schema2", "internal/hcsemu/client"},
	"internal/hns":            {"internal/computenetwork", "internal/hcsemu/client", "internal/hns/hcn"},
	"internal/hcs/schema2":    nil,
	"internal/hns/hcn":        nil,
	"internal/computecore":    nil,
	"internal/computenetwork": nil,

	// The emulator, its client and its neutral leaves. The top package only wires: the daemon
	// (Run) composes the compute engine and the server, and names their surface for the
	// programs beside it. Each emulated service is a package of its own; compute uses hns and
	// storage through narrow interfaces, and none of them imports the server, which sees its
	// engine through an interface of its own (see never below).
	"internal/hcsemu": {"internal/atomicfile", "internal/hcsemu/compute", "internal/hcsemu/hns", "internal/hcsemu/server"},
	// HCS: compute systems, processes, silos, cgroups, utility VMs and hosted containers,
	// users, gMSA, and the engine's wire methods and fault injection.
	"internal/hcsemu/compute": {"internal/cgroup1", "internal/computecore", "internal/computenetwork", "internal/hcs/schema2",
		"internal/hcsemu/dispatch", "internal/hcsemu/hns", "internal/hcsemu/hresult", "internal/hcsemu/layout",
		"internal/hcsemu/storage", "internal/hcsemu/wire", "internal/hns/hcn", "internal/winargs", "internal/winlinux"},
	// The server: transports (unix socket, loopback TCP), the gate, the connections.
	"internal/hcsemu/server": {"internal/atomicfile", "internal/computecore", "internal/hcsemu/dispatch",
		"internal/hcsemu/hresult", "internal/hcsemu/wire"},
	// HNS: networks, endpoints, namespaces, the v1 surface and the dataplane.
	"internal/hcsemu/hns": {"internal/computecore", "internal/computenetwork", "internal/hcsemu/dispatch",
		"internal/hcsemu/hresult", "internal/hcsemu/layout", "internal/hcsemu/wire", "internal/hns/hcn"},
	// The storage filter: layers, volumes, scratch disks, import and export.
	"internal/hcsemu/storage": {"internal/atomicfile", "internal/computecore", "internal/emuvhdx", "internal/hcsemu/dispatch",
		"internal/hcsemu/hresult", "internal/hcsemu/layout", "internal/hcsemu/wire", "internal/wclayer"},
	// What the services and the server agree on to serve a wire method.
	"internal/hcsemu/dispatch": {"internal/hcsemu/wire"},
	// HRESULT errors, strict decoding and GUIDs, which every emulator package fails with.
	"internal/hcsemu/hresult": {"internal/computecore"},
	"internal/hcsemu/client":  {"internal/computecore", "internal/computenetwork", "internal/hcs/schema2", "internal/hcsemu/wire"},
	"internal/hcsemu/wire":    {"internal/computecore", "internal/hcs/schema2"},
	"internal/hcsemu/layout":  nil,
	"internal/emuvhdx":        nil,

	// What the emulator's tests share to reach a daemon over TCP: the protocol only.
	"internal/hcsemu/wire/wiretest": {"internal/hcsemu/wire"},

	// Small shared leaves.
	"internal/atomicfile": nil,
	"internal/winargs":    nil,
	// cgroup v1 groups as jobs, and the Linux stand-ins for accounts, console events and exit
	// codes: shared by hcsemu's compute systems and the Linux HostProcess host.
	"internal/cgroup1":  nil,
	"internal/winlinux": {"internal/hcs/schema2"},
	"internal/testenv":  nil,
	"internal/wintest":  nil,
	"internal/layering": nil,

	"protocols":         nil,
	"protocols/diag":    nil,
	"protocols/options": nil,
	"protocols/stats":   nil,

	// Tests and their helpers. The suites' own files are test files (held by the suite rules
	// below); their non-test imports are none.
	"test/harness": {"internal/hcs", "internal/hcs/schema2", "internal/hcsemu/client", "internal/hcsemu/layout",
		"internal/testenv", "test/image"},
	"test/image":             {"internal/emuvhdx"},
	"test/image/cmd/mkimage": {"test/image"},
	"test/workload":          {"internal/winargs"},
	"test/wincat":            nil,
	// The Wine stand-in powershell.exe (hack/wine): nothing of the project.
	"hack/wine/powershell": nil,
	"test/cmd/demo":        {"test/harness"},
	"test/winnode": {"internal/atomicfile", "internal/hcsemu", "internal/hcsemu/client", "internal/hns",
		"internal/hns/hcn", "test/image", "test/internal/rootdir"},
	"test/e2e":   nil,
	"test/soak":  nil,
	"test/bench": nil,
	"test/cri":   nil,
	// The cluster's control plane joins the node's host network namespace through the
	// emulator's namespace helpers; the Kubernetes suite talks to the API server only.
	"test/cluster": {"internal/atomicfile", "internal/hcsemu", "test/internal/rootdir"},
	// What the node's and the cluster's programs share about the folder they run in.
	"test/internal/rootdir": {"internal/atomicfile"},
	"test/k8s":              nil,
	// The documentation link check reads files only.
	"hack/doccheck": nil,
}

// never are the emulator's packages a package must not depend on, even through another: the
// services do not know the server or the wiring, the server knows no service, and hns and
// storage do not know each other or compute. Checked on go list's Deps, so an indirect path
// fails too.
var never = map[string][]string{
	"internal/hcsemu/compute": {"internal/hcsemu", "internal/hcsemu/server"},
	"internal/hcsemu/server":  {"internal/hcsemu", "internal/hcsemu/compute", "internal/hcsemu/hns", "internal/hcsemu/storage"},
	"internal/hcsemu/hns":     {"internal/hcsemu", "internal/hcsemu/compute", "internal/hcsemu/server", "internal/hcsemu/storage"},
	"internal/hcsemu/storage": {"internal/hcsemu", "internal/hcsemu/compute", "internal/hcsemu/server", "internal/hcsemu/hns"},
}

// standardOnly are the leaves that import nothing outside the standard library either: the
// workload links winargs into a container's binary, and the rest are formats every side shares.
var standardOnly = []string{"internal/winargs", "internal/hcs/schema2", "internal/emuvhdx", "internal/hcsemu/layout"}

// suites are the test suites: nothing imports them, and they import no other suite (a helper
// two suites need goes into test/harness).
var suites = []string{"test/e2e", "test/soak", "test/bench", "test/cri", "test/winnode", "test/k8s"}

// emulatorUsers may import internal/hcsemu and internal/hcsemu/client, with any of their test
// files; every other package, tests included, reaches the emulator only through internal/hcs and
// internal/hns (or, for tests, through test/harness).
var emulatorUsers = []string{"cmd/hcsemu", "internal/hcs", "internal/hns", "internal/hcsemu", "test/harness",
	"test/winnode", "test/cluster", "test/e2e", "test/soak", "test/k8s"}

// emulatorOnly are the emulator's packages that only the emulator imports: the programs beside
// it use the names internal/hcsemu gives them, so that the cut below it stays free to move.
var emulatorOnly = []string{"internal/hcsemu/compute", "internal/hcsemu/server", "internal/hcsemu/hns", "internal/hcsemu/storage",
	"internal/hcsemu/dispatch", "internal/hcsemu/hresult", "internal/hcsemu/wire/wiretest"}

// pkg is what the test reads of `go list -json`.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
	GoFiles      []string
	Error        *struct{ Err string }
}

func TestImportRules(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		t.Run(goos, func(t *testing.T) {
			pkgs := list(t, goos)
			if len(pkgs) < 20 {
				t.Fatalf("go list found %d packages: not the module", len(pkgs))
			}
			for _, p := range pkgs {
				check(t, p)
			}
		})
	}
}

// check applies every rule to one package.
func check(t *testing.T, p pkg) {
	t.Helper()
	name := strings.TrimPrefix(p.ImportPath, module+"/")
	allowed, owner, ok := allowedFor(name)
	if !ok {
		t.Errorf("%s: no entry in the import rules and no listed parent folder: add it to rules with the runhcs packages it may import", name)
		return
	}
	if owner != name {
		t.Logf("%s: not in the import rules; held to %s's (give it an entry of its own)", name, owner)
	}
	for _, imp := range own(p.Imports) {
		if !slices.Contains(allowed, imp) && !(owner != name && strings.HasPrefix(imp, owner+"/") && imp != name) {
			t.Errorf("%s imports %s, which its layer may not (allowed: %v)", name, imp, allowed)
		}
	}
	if slices.Contains(standardOnly, name) {
		for _, d := range p.Deps {
			if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
				t.Errorf("%s depends on %s: it imports the standard library only", name, d)
			}
		}
	}
	for _, d := range own(p.Deps) {
		if slices.Contains(never[name], d) {
			t.Errorf("%s depends on %s, which it must never reach, not even through another package", name, d)
		}
	}
	all := own(slices.Concat(p.Imports, p.TestImports, p.XTestImports))
	for _, imp := range all {
		if strings.HasPrefix(name, "internal/") && strings.HasPrefix(imp, "test/") {
			t.Errorf("%s imports %s: no internal/ package, nor its tests, imports test/", name, imp)
		}
		if strings.HasPrefix(imp, "cmd/") {
			t.Errorf("%s imports %s: a command is imported by nobody", name, imp)
		}
		for _, s := range suites {
			if (imp == s || strings.HasPrefix(imp, s+"/")) && !(name == s || strings.HasPrefix(name, s+"/")) {
				t.Errorf("%s imports %s, a test suite: shared helpers live in test/harness", name, imp)
			}
		}
		if (imp == "internal/hcsemu" || imp == "internal/hcsemu/client") && !slices.Contains(emulatorUsers, name) && !strings.HasPrefix(name, "internal/hcsemu/") {
			t.Errorf("%s imports %s: only %v reach into the emulator", name, imp, emulatorUsers)
		}
		if slices.Contains(emulatorOnly, imp) && !strings.HasPrefix(name, "internal/hcsemu") {
			t.Errorf("%s imports %s: the emulator's own packages are reached through internal/hcsemu", name, imp)
		}
	}
}

// allowedFor returns the rule of name, or of its nearest listed parent folder (owner).
func allowedFor(name string) (allowed []string, owner string, ok bool) {
	for p := name; p != "." && p != ""; p = filepath.ToSlash(filepath.Dir(p)) {
		if a, ok := rules[p]; ok {
			return a, p, true
		}
	}
	return nil, "", false
}

// own keeps the runhcs packages of imports, relative to the module, sorted.
func own(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok && !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// list runs `go list -e -json ./...` for goos at the module's root. Packages without files for
// goos (the Linux-only suites on Windows) are left out; any other error fails t.
func list(t *testing.T, goos string) []pkg {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("GOOS=%s go list: %v\n%s", goos, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("GOOS=%s go list output: %v", goos, err)
		}
		if p.Error != nil {
			if len(p.GoFiles) == 0 && strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
				continue
			}
			t.Errorf("GOOS=%s go list %s: %s", goos, p.ImportPath, p.Error.Err)
			continue
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("GOOS=%s go list listed no package", goos)
	}
	return pkgs
}
