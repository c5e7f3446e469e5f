package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/protocols/stats"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// Builds of the Hyper-V suite (Microsoft's version-compatibility table, in
// docs/notes/hyperv.md §4): a Windows Server 2025 host runs 2019 and 2022 images in
// Hyper-V isolation, but only 2025 and 2022 images in process isolation; an image newer than the
// utility VM (booted from the 2025 pause image) does not run in it.
const (
	hvHostBuild  = "10.0.26100.1" // WS2025, the emulated host
	hvBuild2019  = "10.0.17763.1"
	hvBuild2022  = "10.0.20348.1"
	hvBuildNewer = "10.0.26200.1" // newer than the host and its VMs
)

// hvImage is a test image of one build, its base layer with the utility VM's boot files when
// pause is set.
func hvImage(t *testing.T, env *harness.Env, name, build string, pause bool) string {
	t.Helper()
	img, wl, err := harness.TestImage("docker.io/runhcs/hyperv-" + name + ":latest")
	if err != nil {
		t.Fatal(err)
	}
	img.OSVersion = build
	img.Layers = []image.Layer{image.BaseLayer(wl, image.BaseOptions{UtilityVM: pause, OSVersion: build})}
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 2*time.Minute)
	defer cancel()
	if err := env.ImportTestImage(ctx, img); err != nil {
		t.Fatal(err)
	}
	return img.Name
}

// TestHyperV runs Hyper-V isolated pods as CRI makes them (a sandbox task, then containers
// naming it), chosen by the runtime handler's options (SandboxIsolation = HYPERVISOR), on an
// emulated Windows Server 2025 host.
func TestHyperV(t *testing.T) {
	env := harness.Start(t, harness.Options{HCSEmuArgs: []string{"--os-version", hvHostBuild}})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	pause := hvImage(t, env, "pause", hvHostBuild, true)
	ltsc2019 := hvImage(t, env, "ltsc2019", hvBuild2019, false)
	ltsc2022 := hvImage(t, env, "ltsc2022", hvBuild2022, false)
	newer := hvImage(t, env, "newer", hvBuildNewer, false)
	hv := &options.Options{SandboxIsolation: options.Options_HYPERVISOR}

	inPod := func(pod, kind string, annotations map[string]string) []oci.SpecOpts {
		a := map[string]string{"io.kubernetes.cri.sandbox-id": pod, "io.kubernetes.cri.container-type": kind}
		for k, v := range annotations {
			a[k] = v
		}
		return []oci.SpecOpts{oci.WithAnnotations(a)}
	}
	startPod := func(t *testing.T, pod string, annotations map[string]string) *harness.Task {
		t.Helper()
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: pod, Image: pause, RuntimeOptions: hv, SpecOpts: inPod(pod, "sandbox", annotations)})
		if err != nil {
			t.Fatalf("sandbox %s: %v", pod, err)
		}
		// The sandbox's pid is 0 (it is the VM), and containerd's client does not kill a task
		// of pid 0 in Delete(WithProcessKill), which the harness's cleanup uses
		// (containerd#10441); CRI stops a sandbox with Kill, as deleteTask does. This cleanup
		// runs before the harness's (last registered, first run).
		t.Cleanup(func() { deleteTask(ctx, t, tk) })
		return tk
	}
	// run runs a container of pod to its end and returns its exit code and output.
	run := func(t *testing.T, pod, id, img string, args ...string) (uint32, string) {
		t.Helper()
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Image: img, Args: workload(args...), RuntimeOptions: hv, SpecOpts: inPod(pod, "container", nil)})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		code, err := waitExit(t, id, tk.Exit, 2*time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		out := tk.Stdout() + tk.Stderr()
		deleteTask(ctx, t, tk)
		return code, out
	}

	t.Run("older builds in one Hyper-V pod", func(t *testing.T) {
		sandbox := startPod(t, "hv-pod", nil)
		if sandbox.Task.Pid() != 0 {
			t.Errorf("the sandbox task has pid %d: it is the VM, not a process", sandbox.Task.Pid())
		}
		systems, err := env.ComputeSystems(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range systems {
			found = found || (s.Id == "hv-pod@vm" && s.SystemType == "VirtualMachine")
		}
		if !found {
			t.Fatalf("no VirtualMachine hv-pod@vm among %+v", systems)
		}
		t.Run("containers of 2019 and 2022 images run in it", func(t *testing.T) {
			for _, c := range []struct{ id, img, build string }{{"hv-2019", ltsc2019, hvBuild2019}, {"hv-2022", ltsc2022, hvBuild2022}} {
				code, out := run(t, "hv-pod", c.id, c.img, "echo", "hello from "+c.build)
				if code != 0 || out != "hello from "+c.build+"\n" {
					t.Errorf("%s: exit %d, output %q", c.id, code, out)
				}
			}
		})
		t.Run("a newer image fails clearly", func(t *testing.T) {
			_, err := env.StartTask(ctx, t, harness.TaskRun{ID: "hv-newer", Image: newer, Args: workload("echo", "never"), RuntimeOptions: hv, SpecOpts: inPod("hv-pod", "container", nil)})
			if err == nil || !strings.Contains(err.Error(), "0x80370101") {
				t.Errorf("a %s image in a %s VM: %v, want HCS_E_IMAGE_MISMATCH (0x80370101)", hvBuildNewer, hvHostBuild, err)
			}
		})
		deleteTask(ctx, t, sandbox)
	})

	t.Run("a Hyper-V task outside a pod has a VM of its own", func(t *testing.T) {
		noneLeft := func() {
			t.Helper()
			systems, err := env.ComputeSystems(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range systems {
				if strings.HasPrefix(s.Id, "hv-alone") {
					t.Errorf("compute system %s (%s) left", s.Id, s.SystemType)
				}
			}
		}
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "hv-alone", Image: pause, Args: workload("echo", "alone"), RuntimeOptions: hv})
		if err != nil {
			noneLeft() // a failed create leaves neither the container nor its VM
			t.Fatal(err)
		}
		code, err := waitExit(t, "hv-alone", tk.Exit, 2*time.Minute)
		if err != nil || code != 0 || tk.Stdout() != "alone\n" {
			t.Errorf("exit %d, %v, output %q", code, err, tk.Stdout())
		}
		deleteTask(ctx, t, tk)
		noneLeft()
	})

	t.Run("the older image under process isolation fails", func(t *testing.T) {
		// Refused by HCS at create (the shim cannot know the image's build: containerd passes
		// it no image config), naming both builds and the way out.
		_, err := env.StartTask(ctx, t, harness.TaskRun{ID: "proc-2019", Image: ltsc2019, Args: workload("echo", "never")})
		if err == nil || !strings.Contains(err.Error(), "0x80370101") {
			t.Fatalf("a %s image process-isolated on a %s host: %v, want HCS_E_IMAGE_MISMATCH (0x80370101)", hvBuild2019, hvHostBuild, err)
		}
		for _, want := range []string{"build " + hvBuild2019, "host: " + hvHostBuild, "runhcs-wcow-hypervisor"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not name %q", err, want)
			}
		}
		systems, err := env.ComputeSystems(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range systems {
			if s.Id == "proc-2019" {
				t.Errorf("compute system %s left after the refused create", s.Id)
			}
		}
	})

	t.Run("a 2022 image under process isolation runs on a 2025 host", func(t *testing.T) {
		// Microsoft's table: a 2025 host runs 2022 images process-isolated (not 2019 ones).
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "proc-2022", Image: ltsc2022, Args: workload("echo", "2022 on 2025")})
		if err != nil {
			t.Fatal(err)
		}
		code, err := waitExit(t, "proc-2022", tk.Exit, 2*time.Minute)
		if err != nil || code != 0 || tk.Stdout() != "2022 on 2025\n" {
			t.Errorf("exit %d, %v, output %q", code, err, tk.Stdout())
		}
		deleteTask(ctx, t, tk)
	})

	t.Run("memory is the VM's", func(t *testing.T) {
		sandbox := startPod(t, "hv-mem", map[string]string{"io.microsoft.virtualmachine.computetopology.memory.sizeinmb": "256"})
		code, out := run(t, "hv-mem", "hv-mem-alloc", ltsc2022, "alloc", "400")
		if code == 0 || strings.Contains(out, "allocated 400 MiB") {
			t.Errorf("400 MiB in a 256 MB VM: exit %d, output %q; want it refused", code, out)
		}
		deleteTask(ctx, t, sandbox)
		// The same allocation in a process-isolated container without a limit succeeds.
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "proc-alloc", Image: pause, Args: workload("alloc", "400")})
		if err != nil {
			t.Fatal(err)
		}
		pcode, err := waitExit(t, "proc-alloc", tk.Exit, 2*time.Minute)
		if err != nil || pcode != 0 || !strings.Contains(tk.Stdout(), "allocated 400 MiB") {
			t.Errorf("400 MiB process-isolated: exit %d, %v, output %q", pcode, err, tk.Stdout())
		}
		deleteTask(ctx, t, tk)
	})

	t.Run("shimdiag exec lists the VM's processes, share adds a folder", func(t *testing.T) {
		shimdiag := buildShimdiag(ctx, t)
		sandbox := startPod(t, "hv-diag", nil)
		// A container of the pod runs in the VM: its process shows in the VM's list.
		sleeper, err := env.StartTask(ctx, t, harness.TaskRun{ID: "hv-diag-sleep", Image: ltsc2022, Args: workload("sleep", "600"), RuntimeOptions: hv, SpecOpts: inPod("hv-diag", "container", nil)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(env.Root, "containerd", "state", "io.containerd.runtime.v2.task", harness.Namespace, "hv-diag", "address"))
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, shimdiag, "exec", "--timeout", "2m", strings.TrimSpace(string(b)), `C:\Windows\System32\workload.exe`, "ps")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("shimdiag exec: %v\nstderr: %s", err, stderr.String())
		}
		out := stdout.String()
		t.Logf("the VM's processes:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.HasPrefix(out, "1 ") {
			t.Errorf("the VM's process list does not start at pid 1 (its own PID namespace):\n%s", out)
		}
		hostProcs, _ := filepath.Glob("/proc/[0-9]*")
		if len(lines) >= len(hostProcs) {
			t.Errorf("the VM lists %d processes, the host has %d: not the VM's own", len(lines), len(hostProcs))
		}
		for _, host := range []string{"containerd", "containerd-shim-runhcs-v1", "containerd-wcow-snapshotter"} {
			if strings.Contains(out, host) {
				t.Errorf("the VM's process list shows the host's %s:\n%s", host, out)
			}
		}
		// The sleeper runs the image's C:\workload\workload.exe; ps itself runs the VM's
		// C:\Windows\System32\workload.exe.
		if !strings.Contains(out, image.WorkloadPath) {
			t.Errorf("the VM's process list lacks the pod's container process %s:\n%s", image.WorkloadPath, out)
		}
		deleteTask(ctx, t, sleeper)

		// shimdiag share: a host folder appears in the VM at the path asked for.
		host := t.TempDir()
		if err := os.WriteFile(filepath.Join(host, "hello.txt"), []byte("shared from the host"), 0o644); err != nil {
			t.Fatal(err)
		}
		diag := func(args ...string) (string, error) {
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, shimdiag, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil {
				err = fmt.Errorf("shimdiag %s: %w\nstderr: %s", strings.Join(args, " "), err, stderr.String())
			}
			return stdout.String(), err
		}
		address := strings.TrimSpace(string(b))
		if _, err := diag("share", "--readonly", address, host, `C:\hostshare`); err != nil {
			t.Fatal(err)
		}
		got, err := diag("exec", "--timeout", "2m", address, `C:\Windows\System32\workload.exe`, "read", `C:\hostshare\hello.txt`)
		if err != nil || got != "shared from the host" {
			t.Errorf("the shared file read in the VM: %q, %v", got, err)
		}
		deleteTask(ctx, t, sandbox)
	})

	t.Run("the sandbox's stats are the VM's, and its update resizes the VM", func(t *testing.T) {
		sandbox := startPod(t, "hv-stats", nil)
		assigned := func() uint64 {
			t.Helper()
			m, err := sandbox.Task.Metrics(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v, err := typeurl.UnmarshalAny(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := v.(*stats.Statistics)
			if !ok || st.GetVm() == nil {
				t.Fatalf("sandbox metrics %T %v: want containerd.runhcs.stats.v1.Statistics with a vm part", v, v)
			}
			return st.GetVm().GetMemory().GetVmMemory().GetAssignedMemory()
		}
		// AssignedMemory is in 4 KiB pages (hcsshim's stats.go).
		if got := assigned(); got != 1024<<20/4096 {
			t.Errorf("assigned memory %d pages, want 1024 MB's", got)
		}
		limit := uint64(2048 << 20)
		if err := sandbox.Task.Update(ctx, containerd.WithResources(&specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &limit}})); err != nil {
			t.Fatal(err)
		}
		if got := assigned(); got != 2048<<20/4096 {
			t.Errorf("assigned memory %d pages after the update, want 2048 MB's", got)
		}
	})

	crash := func(t *testing.T, pod string, containers ...string) {
		exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
		sandbox := startPod(t, pod, nil)
		var tasks []*harness.Task
		for _, id := range containers {
			tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Image: ltsc2019, Args: workload("sleep", "600"), RuntimeOptions: hv, SpecOpts: inPod(pod, "container", nil)})
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, tk)
		}
		f, err := client.DialFault(env.HCSEmuAddress)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Crash(pod + "@vm"); err != nil {
			t.Fatalf("crash the VM: %v", err)
		}
		for _, tk := range append([]*harness.Task{sandbox}, tasks...) {
			if _, err := waitExit(t, tk.Container.ID(), tk.Exit, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for _, tk := range append([]*harness.Task{sandbox}, tasks...) {
			deleteTask(ctx, t, tk)
			ids = append(ids, tk.Container.ID())
		}
		// A duplicate TaskExit would come before the task's TaskDelete (one ordered queue).
		if err := exits.CheckDeleted(ids, time.Minute); err != nil {
			t.Error(err)
		}
		systems, err := env.ComputeSystems(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(systems) != 0 {
			t.Errorf("compute systems left after the crash and the deletes: %+v", systems)
		}
	}
	t.Run("a VM crash ends its sandbox once and leaves nothing", func(t *testing.T) { crash(t, "hv-crash0") })
	t.Run("a VM crash ends every task once and leaves nothing", func(t *testing.T) { crash(t, "hv-crash", "hv-crash-a", "hv-crash-b") })
}
