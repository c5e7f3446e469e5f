package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu"
	emuclient "github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// withUser sets the spec's process user as containerd's CRI does for runAsUserName
// (pkg/oci WithUser on a Windows spec: Process.User.Username).
func withUser(name string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Process.User = specs.User{Username: name}
		return nil
	}
}

// TestUsers runs containers as the accounts of a Windows base image (issue 16): the user of
// the spec reaches HCS for the init process and for an exec, the workload sees its account's
// environment and file access, an image's default user applies, and an unknown user fails with
// Windows' ERROR_LOGON_FAILURE.
func TestUsers(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	// A layer's folder is writable only by administrators (hcsemu's convention, doc.go "Users").
	const adminOnly = `C:\Windows\System32\probe.txt`

	t.Run("ContainerUser", func(t *testing.T) {
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "user-init", Args: workload("sleep", "600"), SpecOpts: []oci.SpecOpts{withUser("ContainerUser")}})
		if err != nil {
			t.Fatal(err)
		}
		// Execs inherit the init process's spec (execIn copies it), so they run as ContainerUser.
		r, err := execIn(ctx, t, env, tk, "whoami", workload("whoami")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "user=User Manager\\ContainerUser\nuid=1000 gid=545\n"; r.stdout != want || r.code != 0 {
			t.Errorf("whoami as ContainerUser = %q (exit %d, stderr %q), want %q", r.stdout, r.code, r.stderr, want)
		}
		r, err = execIn(ctx, t, env, tk, "env", workload("env", "USERNAME", "USERPROFILE", "TEMP")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "USERNAME=ContainerUser\nUSERPROFILE=C:\\Users\\ContainerUser\nTEMP=C:\\Users\\ContainerUser\\AppData\\Local\\Temp\n"; r.stdout != want {
			t.Errorf("env = %q (stderr %q), want %q", r.stdout, r.stderr, want)
		}
		r, err = execIn(ctx, t, env, tk, "write-admin", workload("write", adminOnly, "x")...)
		if err != nil {
			t.Fatal(err)
		}
		if r.code == 0 || !strings.Contains(r.stderr, "permission denied") {
			t.Errorf("ContainerUser writing %s: exit %d, stderr %q; want a refusal", adminOnly, r.code, r.stderr)
		}
		r, err = execIn(ctx, t, env, tk, "write-own", workload("write", `C:\Users\ContainerUser\AppData\Local\Temp\mine.txt`, "x")...)
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 0 {
			t.Errorf("ContainerUser writing its TEMP: exit %d, stderr %q", r.code, r.stderr)
		}

		// An exec as another user than the init process.
		spec, err := tk.Container.Spec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		admin := *spec.Process
		admin.User = specs.User{Username: "ContainerAdministrator"}
		admin.Args, admin.Terminal = workload("whoami"), false
		r, err = execSpec(ctx, t, env, tk, "whoami-admin", &admin)
		if err != nil {
			t.Fatal(err)
		}
		if want := "user=User Manager\\ContainerAdministrator\nuid=0 gid=0\n"; r.stdout != want || r.code != 0 {
			t.Errorf("exec as ContainerAdministrator: whoami = %q (exit %d), want %q", r.stdout, r.code, want)
		}
		admin.Args = workload("write", adminOnly, "x")
		if r, err = execSpec(ctx, t, env, tk, "write-admin-2", &admin); err != nil || r.code != 0 {
			t.Errorf("ContainerAdministrator writing %s: %+v, %v; want success", adminOnly, r, err)
		}
		killAndWait(ctx, t, tk)
	})

	t.Run("image default user", func(t *testing.T) {
		img, _, err := harness.TestImage("docker.io/runhcs/test-containeruser:latest")
		if err != nil {
			t.Fatal(err)
		}
		img.User = "ContainerUser"
		if err := env.ImportTestImage(ctx, img); err != nil {
			t.Fatal(err)
		}
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: "user-image", Image: img.Name, Args: workload("whoami")})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := waitExit(t, "user-image", tk.Exit, 2*time.Minute); err != nil || code != 0 {
			t.Fatalf("exit %d, %v; stderr %q", code, err, tk.Stderr())
		}
		if got, want := tk.Stdout(), "user=User Manager\\ContainerUser\nuid=1000 gid=545\n"; got != want {
			t.Errorf("whoami = %q, want %q (the image's User)", got, want)
		}
	})

	t.Run("unknown user", func(t *testing.T) {
		_, err := env.StartTask(ctx, t, harness.TaskRun{ID: "user-unknown", Args: workload("whoami"), SpecOpts: []oci.SpecOpts{withUser("nobody")}})
		if err == nil || !strings.Contains(err.Error(), "0x8007052e") {
			t.Fatalf("start as nobody: %v; want ERROR_LOGON_FAILURE (0x8007052e)", err)
		}
	})
}

// gmsaSpec is a credential spec as Microsoft's New-CredentialSpec writes it.
const gmsaSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"},{"Name":"webapp01","Scope":"CONTOSO"}]}}`

// withCredentialSpec sets the spec's credential spec as containerd's CRI does
// (WithWindowsCredentialSpec: the JSON string).
func withCredentialSpec(doc string) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Windows.CredentialSpec = doc
		return nil
	}
}

// credentialGuards lists hcsemu's Container Credential Guard instances, as HCS's service
// property shows them.
func credentialGuards(ctx context.Context, t *testing.T, env *harness.Env) []string {
	t.Helper()
	var ids []string
	for _, i := range credentialGuardInstances(ctx, t, env) {
		ids = append(ids, i.Id)
	}
	return ids
}

func credentialGuardInstances(ctx context.Context, t *testing.T, env *harness.Env) []schema2.ContainerCredentialGuardInstance {
	t.Helper()
	api, err := emuclient.DialHCS(env.HCSEmuAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	in, err := hcs.NewClient(api).CredentialGuards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// removeHvSocketService asks utility VM vmID to remove HvSocket service svc, through HCS as any
// client could: the answer says whether the entry is there (ERROR_BUSY while a container uses
// it, not found once it is gone). HCS has no property listing a VM's service table.
func removeHvSocketService(ctx context.Context, t *testing.T, env *harness.Env, vmID, svc string) error {
	t.Helper()
	api, err := emuclient.DialHCS(env.HCSEmuAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	vm, err := hcs.NewClient(api).OpenComputeSystem(ctx, vmID)
	if err != nil {
		t.Fatalf("open utility VM %s: %v", vmID, err)
	}
	defer vm.Close()
	return vm.Modify(ctx, &schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, svc), RequestType: schema2.RequestTypeRemove})
}

// hvServiceGone fails t unless vmID's HvSocket service svc is gone.
func hvServiceGone(ctx context.Context, t *testing.T, env *harness.Env, vmID, svc string) {
	t.Helper()
	if err := removeHvSocketService(ctx, t, env, vmID, svc); !hcs.IsGone(err) {
		t.Errorf("HvSocket service %s of utility VM %s: remove answered %v, want not found (the entry left behind)", svc, vmID, err)
	}
}

// TestGMSA runs containers with a gMSA credential spec (issue 16): the container sees its
// domain and account, its Container Credential Guard instance exists while it runs and is gone
// after delete, also when its shim was killed, and a bad spec is refused naming the field.
func TestGMSA(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()

	t.Run("the container sees its account", func(t *testing.T) {
		const id = "gmsa-run"
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "600"), SpecOpts: []oci.SpecOpts{withCredentialSpec(gmsaSpec)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 1 || got[0] != id {
			t.Fatalf("Container Credential Guard instances %v, want [%s]", got, id)
		}
		r, err := execIn(ctx, t, env, tk, "whoami", workload("whoami")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "user=User Manager\\ContainerAdministrator\nnetwork=CONTOSO\\webapp01$\nuid=0 gid=0\n"; r.stdout != want || r.code != 0 {
			t.Errorf("whoami = %q (exit %d, stderr %q), want %q", r.stdout, r.code, r.stderr, want)
		}
		r, err = execIn(ctx, t, env, tk, "env", workload("env", "USERDNSDOMAIN")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "USERDNSDOMAIN=CONTOSO.COM\n"; r.stdout != want {
			t.Errorf("env = %q, want %q", r.stdout, want)
		}
		killAndWait(ctx, t, tk)
		if _, err := tk.Task.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 0 {
			t.Errorf("Container Credential Guard instances after delete: %v, want none", got)
		}
	})

	t.Run("bad spec refused naming the field", func(t *testing.T) {
		bad := strings.Replace(gmsaSpec, `"NetBiosName":"CONTOSO"`, `"NetBiosName":""`, 1)
		_, err := env.StartTask(ctx, t, harness.TaskRun{ID: "gmsa-bad", Args: workload("whoami"), SpecOpts: []oci.SpecOpts{withCredentialSpec(bad)}})
		if err == nil || !strings.Contains(err.Error(), "windows.credentialSpec.DomainJoinConfig.NetBiosName") {
			t.Fatalf("create with an empty NetBiosName: %v; want an error naming the field", err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 0 {
			t.Errorf("Container Credential Guard instances after a refused create: %v, want none", got)
		}
	})

	t.Run("shim killed", func(t *testing.T) {
		const id = "gmsa-crash"
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "600"), SpecOpts: []oci.SpecOpts{withCredentialSpec(gmsaSpec)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 1 {
			t.Fatalf("Container Credential Guard instances %v, want [%s]", got, id)
		}
		shims := env.ShimPids(id)
		if len(shims) != 1 {
			t.Fatalf("shims of %s: %v, want one", id, shims)
		}
		exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
		if err := syscall.Kill(shims[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// containerd runs the shim's delete action before it reports the exit.
		exits.WaitExit(t, id, 30*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := credentialGuards(ctx, t, env)
			if len(got) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Container Credential Guard instances after the shim was killed: %v, want none", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, _ = tk.Task.Delete(ctx)
	})

	// Hyper-V isolation: a pod's container gets an HvSocket instance whose service the pod's
	// VM carries while the container lives (hcsshim's resources_wcow.go).
	hv := &options.Options{SandboxIsolation: options.Options_HYPERVISOR}
	inPod := func(pod, kind string) oci.SpecOpts {
		return oci.WithAnnotations(map[string]string{"io.kubernetes.cri.sandbox-id": pod, "io.kubernetes.cri.container-type": kind})
	}
	startPod := func(t *testing.T, pod string) *harness.Task {
		t.Helper()
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: pod, RuntimeOptions: hv, SpecOpts: []oci.SpecOpts{inPod(pod, "sandbox")}})
		if err != nil {
			t.Fatalf("sandbox %s: %v", pod, err)
		}
		// The sandbox's pid is 0: the harness's cleanup would not kill it (TestHyperV).
		t.Cleanup(func() { deleteTask(ctx, t, tk) })
		return tk
	}
	t.Run("Hyper-V pod: the container sees its account", func(t *testing.T) {
		const pod, id = "gmsa-pod", "gmsa-hv"
		sandbox := startPod(t, pod)
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "600"), RuntimeOptions: hv, SpecOpts: []oci.SpecOpts{inPod(pod, "container"), withCredentialSpec(gmsaSpec)}})
		if err != nil {
			t.Fatal(err)
		}
		in := credentialGuardInstances(ctx, t, env)
		if len(in) != 1 || in[0].Id != id || in[0].CredentialGuard == nil || in[0].CredentialGuard.Transport != schema2.CCGTransportHvSocket || in[0].HvSocketConfig == nil {
			t.Fatalf("Container Credential Guard instances %+v, want one of transport HvSocket for %s", in, id)
		}
		svc := in[0].HvSocketConfig.ServiceId
		if err := removeHvSocketService(ctx, t, env, pod+"@vm", svc); err == nil || !strings.Contains(err.Error(), "0x800700aa") {
			t.Errorf("the instance's HvSocket service in the pod's VM: remove answered %v, want ERROR_BUSY (there, in use)", err)
		}
		r, err := execIn(ctx, t, env, tk, "whoami", workload("whoami")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "user=User Manager\\ContainerAdministrator\nnetwork=CONTOSO\\webapp01$\nuid=0 gid=0\n"; r.stdout != want || r.code != 0 {
			t.Errorf("whoami = %q (exit %d, stderr %q), want %q", r.stdout, r.code, r.stderr, want)
		}
		r, err = execIn(ctx, t, env, tk, "env", workload("env", "USERDNSDOMAIN")...)
		if err != nil {
			t.Fatal(err)
		}
		if want := "USERDNSDOMAIN=CONTOSO.COM\n"; r.stdout != want {
			t.Errorf("env = %q, want %q", r.stdout, want)
		}
		deleteTask(ctx, t, tk)
		if got := credentialGuards(ctx, t, env); len(got) != 0 {
			t.Errorf("Container Credential Guard instances after delete: %v, want none", got)
		}
		hvServiceGone(ctx, t, env, pod+"@vm", svc)
		if st, err := sandbox.Task.Status(ctx); err != nil || st.Status != containerd.Running {
			t.Errorf("the pod's sandbox after its container's delete: %v %v, want running", st.Status, err)
		}
	})

	t.Run("Hyper-V pod: refused create", func(t *testing.T) {
		const pod, id = "gmsa-pod-refused", "gmsa-hv-newer"
		startPod(t, pod)
		// An image newer than the VM fails in HCS (HCS_E_IMAGE_MISMATCH), after the instance and
		// its service were made.
		newer := hvImage(t, env, "gmsa-newer", hvBuildNewer, false)
		_, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Image: newer, Args: workload("whoami"), RuntimeOptions: hv, SpecOpts: []oci.SpecOpts{inPod(pod, "container"), withCredentialSpec(gmsaSpec)}})
		if err == nil || !strings.Contains(err.Error(), "0x80370101") {
			t.Fatalf("a %s image in a %s VM: %v, want HCS_E_IMAGE_MISMATCH", hvBuildNewer, image.DefaultOSVersion, err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 0 {
			t.Errorf("Container Credential Guard instances after a refused create: %v, want none", got)
		}
		hvServiceGone(ctx, t, env, pod+"@vm", hcsemu.CCGServiceID(id))
	})

	t.Run("Hyper-V pod: shim killed", func(t *testing.T) {
		const pod, id = "gmsa-pod-crash", "gmsa-hv-crash"
		startPod(t, pod)
		if _, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload("sleep", "600"), RuntimeOptions: hv, SpecOpts: []oci.SpecOpts{inPod(pod, "container"), withCredentialSpec(gmsaSpec)}}); err != nil {
			t.Fatal(err)
		}
		if got := credentialGuards(ctx, t, env); len(got) != 1 {
			t.Fatalf("Container Credential Guard instances %v, want [%s]", got, id)
		}
		shims := env.ShimPids(pod)
		if len(shims) != 1 {
			t.Fatalf("shims of pod %s: %v, want one", pod, shims)
		}
		exits := harness.WatchTaskEvents(ctx, t, env.Client(t))
		if err := syscall.Kill(shims[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// containerd runs the shim's delete action for each task before it reports its exit.
		exits.WaitExit(t, id, 30*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := credentialGuards(ctx, t, env)
			if len(got) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Container Credential Guard instances after the pod's shim was killed: %v, want none", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The VM ended with the shim's handles, its service table with it.
		deadline = time.Now().Add(30 * time.Second)
		for {
			systems, err := env.ComputeSystems(ctx)
			if err != nil {
				t.Fatal(err)
			}
			left := ""
			for _, s := range systems {
				if s.Id == pod+"@vm" || s.Id == id {
					left = s.Id
				}
			}
			if left == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("compute system %s left after the pod's shim was killed", left)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
