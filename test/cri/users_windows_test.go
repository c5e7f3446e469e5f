//go:build windows

package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// Issue 16 through CRI: kubelet's windowsOptions.runAsUserName becomes
// WindowsContainerSecurityContext.RunAsUsername and gmsaCredentialSpec becomes its
// CredentialSpec (the JSON document). containerd 2.4.2's CRI (buildWindowsSpec,
// internal/cri/server/container_create.go) copies them into the OCI spec as Process.User.Username
// (pkg/oci WithUser: a Windows spec keeps the name as is) and Windows.CredentialSpec (the raw
// string, internal/cri/opts WithWindowsCredentialSpec), and checks neither: the shim does.

// adminOnly is a path only administrators may write (hcsemu's convention: a layer's folder is
// writable only by ContainerAdministrator; docs/emulator.md, "Users and gMSA").
const adminOnly = `C:\Windows\System32\probe.txt`

// asUser is containerConfig run as the Windows account user.
func asUser(user, name string, args ...string) *runtimeapi.ContainerConfig {
	cfg := containerConfig(name, args...)
	cfg.Windows.SecurityContext.RunAsUsername = user
	return cfg
}

// readLog is the container's CRI log file.
func readLog(t *testing.T, podCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(podCfg.LogDirectory, cfg.LogPath))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunAsUsername runs containers as the accounts of a Windows base image through CRI: the
// account's environment reaches the workload, and only ContainerAdministrator may write where
// only administrators may.
func TestRunAsUsername(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-users")

	env := asUser("ContainerUser", "user-env", "env", "USERNAME", "USERPROFILE")
	id := startContainer(t, n, pod, podCfg, env)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Fatalf("env as ContainerUser: exit code %d; log %q", s.GetExitCode(), readLog(t, podCfg, env))
	}
	log := readLog(t, podCfg, env)
	for _, want := range []string{" stdout F USERNAME=ContainerUser\n", ` stdout F USERPROFILE=C:\Users\ContainerUser` + "\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("CRI log %q: want %q", log, want)
		}
	}

	userWrite := asUser("ContainerUser", "user-write", "write", adminOnly, "x")
	id = startContainer(t, n, pod, podCfg, userWrite)
	if s := waitExited(t, n, id); s.GetExitCode() == 0 || !strings.Contains(readLog(t, podCfg, userWrite), "permission denied") {
		t.Errorf("ContainerUser writing %s: exit code %d, log %q; want a refusal", adminOnly, s.GetExitCode(), readLog(t, podCfg, userWrite))
	}
	adminWrite := asUser("ContainerAdministrator", "admin-write", "write", adminOnly, "x")
	id = startContainer(t, n, pod, podCfg, adminWrite)
	if s := waitExited(t, n, id); s.GetExitCode() != 0 {
		t.Errorf("ContainerAdministrator writing %s: exit code %d, log %q; want success", adminOnly, s.GetExitCode(), readLog(t, podCfg, adminWrite))
	}
}

// userImage is the node's test image with ContainerUser as its default user (test/winnode
// UserImage).
const userImage = "docker.io/runhcs/test-containeruser:latest"

// TestImageUser: with no RunAsUsername the image's default user (image config User) applies, as
// containerd's CRI starts from it (buildWindowsSpec); RunAsUsername overrides it.
func TestImageUser(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-image-user")
	for _, tc := range []struct {
		runAs string
		want  []string
	}{
		{"", []string{" stdout F user=User Manager\\ContainerUser\n", " stdout F uid=1000 gid=545\n"}},
		{"ContainerAdministrator", []string{" stdout F user=User Manager\\ContainerAdministrator\n", " stdout F uid=0 gid=0\n"}},
	} {
		cfg := asUser(tc.runAs, "image-user"+strings.ToLower(tc.runAs), "whoami")
		cfg.Image = &runtimeapi.ImageSpec{Image: userImage}
		id := startContainer(t, n, pod, podCfg, cfg)
		s := waitExited(t, n, id)
		log := readLog(t, podCfg, cfg)
		for _, want := range tc.want {
			if s.GetExitCode() != 0 || !strings.Contains(log, want) {
				t.Errorf("whoami in %s, RunAsUsername %q: exit code %d, log %q; want %q", userImage, tc.runAs, s.GetExitCode(), log, want)
			}
		}
	}
}

// TestExecSyncUser: CRI has no per-exec user (ExecSyncRequest carries only the command and a
// timeout), and containerd's CRI runs an exec with the container spec's process, user included
// (internal/cri/server container_execsync.go execInternal copies spec.Process). So what CRI
// exposes is that an exec runs as the container's user, not as ContainerAdministrator; an exec as
// another user than init is covered below CRI (test/e2e TestUsers).
func TestExecSyncUser(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-exec-user")
	id := startContainer(t, n, pod, podCfg, asUser("ContainerUser", "user-sleeps", "sleep", "600"))
	stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "whoami"}, time.Minute)
	if want := "user=User Manager\\ContainerUser\nuid=1000 gid=545\n"; err != nil || string(stdout) != want {
		t.Fatalf("ExecSync whoami: stdout %q, stderr %q, %v; want %q", stdout, stderr, err, want)
	}
	_, stderr, err = n.rt.ExecSync(ctx(t), id, []string{workload, "write", adminOnly, "x"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 || !strings.Contains(string(stderr), "permission denied") {
		t.Fatalf("ExecSync write %s as ContainerUser: stderr %q, %v; want a refusal", adminOnly, stderr, err)
	}
}

// TestUnknownUser: a user the container's SAM does not have fails with Windows' error for it,
// ERROR_LOGON_FAILURE (0x8007052E), which HCS returns when it creates the init process. containerd's
// CRI creates the task, and so reaches the shim, only in StartContainer (CreateContainer stores
// the container's metadata and snapshot), so that is where it fails.
func TestUnknownUser(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-unknown-user")
	cfg := asUser("nobody", "nobody", "whoami")
	if _, err := n.img.PullImage(ctx(t), cfg.Image, nil, podCfg); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	id, err := n.rt.CreateContainer(ctx(t), pod, cfg, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	removeAtEnd(t, n, id)
	err = n.rt.StartContainer(ctx(t), id)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "0x8007052e") {
		t.Fatalf("StartContainer as nobody: %v; want ERROR_LOGON_FAILURE (0x8007052e)", err)
	}
	if systems := computeSystems(t); containsPrefix(systems, id) {
		t.Errorf("compute systems after the failed start: %v; want none of %s", systems, id)
	}
}

// removeAtEnd removes the container at the end of the test, as startContainer does.
func removeAtEnd(t *testing.T, n *node, id string) {
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.RemoveContainer(c, id)
	})
}

// gmsaSpec is a credential spec as Microsoft's New-CredentialSpec writes it and the GMSA admission
// webhook inlines it into gmsaCredentialSpec.
const gmsaSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"},{"Name":"webapp01","Scope":"CONTOSO"}]}}`

// credentialGuards lists the emulated host's Container Credential Guard instances (HCS's service
// property, through the stand-in computecore.dll).
func credentialGuards(t *testing.T) []string {
	t.Helper()
	in, err := hcs.NewHostClient().CredentialGuards(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range in {
		ids = append(ids, i.Id)
	}
	return ids
}

// TestGMSA runs a container with a gMSA credential spec through CRI, in a process-isolated pod
// (default handler) and in a Hyper-V isolated one (runhcs-wcow-hypervisor): it sees its domain
// and the account it has on the network, its Container Credential Guard instance lives as long as
// its task (and in a Hyper-V pod the instance's HvSocket service in the pod's utility VM too), and
// a bad spec is refused naming the field with nothing left.
func TestGMSA(t *testing.T) {
	n := connect(t)
	for _, c := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}} {
		t.Run(c.name, func(t *testing.T) { testGMSA(t, n, c.handler) })
	}
}

func testGMSA(t *testing.T, n *node, handler string) {
	pod, podCfg := runPodWith(t, n, "pod-gmsa", handler)
	if got := credentialGuards(t); len(got) != 0 {
		t.Fatalf("Container Credential Guard instances before the test: %v", got)
	}

	cfg := containerConfig("gmsa", "sleep", "600")
	cfg.Windows.SecurityContext.CredentialSpec = gmsaSpec
	id := startContainer(t, n, pod, podCfg, cfg)
	in, err := hcs.NewHostClient().CredentialGuards(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	transport := schema2.CCGTransportLRPC
	if handler == hypervHandler {
		transport = schema2.CCGTransportHvSocket
	}
	if len(in) != 1 || in[0].Id != id || in[0].CredentialGuard == nil || in[0].CredentialGuard.Transport != transport {
		t.Fatalf("Container Credential Guard instances %+v, want one of transport %s for %s", in, transport, id)
	}
	// A Hyper-V pod's VM carries the instance's HvSocket service while the container lives:
	// removing it is refused as in use (ERROR_BUSY).
	vmID, svc := pod+"@vm", ""
	if handler == hypervHandler {
		if in[0].HvSocketConfig == nil {
			t.Fatalf("HvSocket instance %+v without its service", in[0])
		}
		svc = in[0].HvSocketConfig.ServiceId
		if err := removeHvSocketService(t, vmID, svc); err == nil || !strings.Contains(err.Error(), "0x800700aa") {
			t.Errorf("the instance's HvSocket service in VM %s: remove answered %v, want ERROR_BUSY (there, in use)", vmID, err)
		}
	}
	stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "whoami"}, time.Minute)
	if want := "user=User Manager\\ContainerAdministrator\nnetwork=CONTOSO\\webapp01$\nuid=0 gid=0\n"; err != nil || string(stdout) != want {
		t.Errorf("ExecSync whoami: stdout %q, stderr %q, %v; want %q", stdout, stderr, err, want)
	}
	stdout, stderr, err = n.rt.ExecSync(ctx(t), id, []string{workload, "env", "USERDNSDOMAIN"}, time.Minute)
	if want := "USERDNSDOMAIN=CONTOSO.COM\n"; err != nil || string(stdout) != want {
		t.Errorf("ExecSync env: stdout %q, stderr %q, %v; want %q", stdout, stderr, err, want)
	}
	if err := n.rt.StopContainer(ctx(t), id, 10); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	waitExited(t, n, id)
	if err := n.rt.RemoveContainer(ctx(t), id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	if got := credentialGuards(t); len(got) != 0 {
		t.Errorf("Container Credential Guard instances after RemoveContainer: %v, want none", got)
	}
	if svc != "" {
		if err := removeHvSocketService(t, vmID, svc); !hcs.IsGone(err) {
			t.Errorf("HvSocket service %s of VM %s after RemoveContainer: remove answered %v, want not found (the entry left behind)", svc, vmID, err)
		}
	}

	// containerd's CRI passes the spec on unchecked and creates the task in StartContainer, so
	// the shim's refusal surfaces there (CreateContainer never reaches the runtime).
	bad := containerConfig("gmsa-bad", "whoami")
	bad.Windows.SecurityContext.CredentialSpec = strings.Replace(gmsaSpec, `"NetBiosName":"CONTOSO"`, `"NetBiosName":""`, 1)
	id, err = n.rt.CreateContainer(ctx(t), pod, bad, podCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	removeAtEnd(t, n, id)
	err = n.rt.StartContainer(ctx(t), id)
	if err == nil || !strings.Contains(err.Error(), "windows.credentialSpec.DomainJoinConfig.NetBiosName") {
		t.Fatalf("StartContainer with an empty NetBiosName: %v; want an error naming the field", err)
	}
	if got := credentialGuards(t); len(got) != 0 {
		t.Errorf("Container Credential Guard instances after a refused start: %v, want none", got)
	}
	if systems := computeSystems(t); containsPrefix(systems, id) {
		t.Errorf("compute systems after a refused start: %v; want none of %s", systems, id)
	}
}

// removeHvSocketService asks utility VM vmID to remove HvSocket service svc, as any HCS client
// could: the answer says whether the entry is there (ERROR_BUSY while a container uses it, not
// found once it is gone); HCS has no property listing a VM's service table.
func removeHvSocketService(t *testing.T, vmID, svc string) error {
	t.Helper()
	vm, err := hcs.NewHostClient().OpenComputeSystem(ctx(t), vmID)
	if err != nil {
		t.Fatalf("open utility VM %s: %v", vmID, err)
	}
	defer vm.Close()
	return vm.Modify(ctx(t), &schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathHvSocketServiceFormat, svc), RequestType: schema2.RequestTypeRemove})
}
