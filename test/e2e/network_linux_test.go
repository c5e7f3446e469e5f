package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/test/harness"
)

// TestPodNetworking runs two pods (a pause container and one more each, process isolation) on
// one HNS network that the test makes through internal/hns, as a CNI plugin would: an
// endpoint per pod in the pod's HNS namespace, and a hostPort mapping on pod A's. Then a
// container of pod B reaches pod A's address over TCP, a second container of pod A reaches the
// first over 127.0.0.1, and a program in the emulated host's network namespace reaches pod A
// directly and through the mapped host port, at the host's address and at 127.0.0.1. After the pods and the HNS objects are deleted,
// no namespace, veth, bridge or endpoint is left.
func TestPodNetworking(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 5*time.Minute)
	defer cancel()

	api, err := client.DialHNS(env.HCSEmuAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	h := hns.NewClient(api)
	network, err := h.CreateNetwork(ctx, &hcn.HostComputeNetwork{
		Name: "e2e-pods", Type: hcn.NAT,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: "10.252.0.0/24",
			Routes:          []hcn.Route{{NextHop: "10.252.0.1", DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hostPort, _ := json.Marshal(hcn.PortMappingPolicySetting{Protocol: 6, ExternalPort: 18080, InternalPort: 8080})
	podNet := func(name, ip string, dns hcn.Dns, policies ...hcn.EndpointPolicy) (nsID, epID string) {
		t.Helper()
		ns, err := h.CreateNamespace(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ep, err := h.CreateEndpoint(ctx, network.Id, &hcn.HostComputeEndpoint{
			Name: name, IpConfigurations: []hcn.IpConfig{{IpAddress: ip, PrefixLength: 24}}, Policies: policies, Dns: dns,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddNamespaceEndpoint(ctx, ns.Id, ep.Id); err != nil {
			t.Fatal(err)
		}
		return ns.Id, ep.Id
	}
	nsA, epA := podNet("pod-a_e2e-pods", "10.252.0.10", hcn.Dns{}, hcn.EndpointPolicy{Type: hcn.PortMapping, Settings: hostPort})
	// Pod B's endpoint carries DNS settings, as win-bridge writes a pod's dns_config.
	nsB, epB := podNet("pod-b_e2e-pods", "10.252.0.20", hcn.Dns{Search: []string{"pod-b.svc.cluster.local", "svc.cluster.local"}, ServerList: []string{"10.10.10.10"}})

	// A pod as CRI makes one: the pause container names the pod's namespace and is the
	// sandbox; the pod's containers carry the same namespace and the sandbox's id.
	inPod := func(sandbox, kind, ns string) []oci.SpecOpts {
		return []oci.SpecOpts{
			oci.WithAnnotations(map[string]string{
				"io.kubernetes.cri.sandbox-id":     sandbox,
				"io.kubernetes.cri.container-type": kind,
			}),
			func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
				if s.Windows == nil {
					s.Windows = &specs.Windows{}
				}
				s.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: ns}
				return nil
			},
		}
	}
	start := func(id string, opts []oci.SpecOpts, args ...string) *harness.Task {
		t.Helper()
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Args: workload(args...), SpecOpts: opts})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	var tasks []*harness.Task
	tasks = append(tasks, start("net-pod-a", inPod("net-pod-a", "sandbox", nsA), "sleep", "600"))
	server := start("net-pod-a-server", inPod("net-pod-a", "container", nsA), "listen", "0.0.0.0:8080")
	tasks = append(tasks, server)
	if err := server.WaitOutput(ctx, "listening"); err != nil {
		t.Fatal(err)
	}
	tasks = append(tasks, start("net-pod-b", inPod("net-pod-b", "sandbox", nsB), "sleep", "600"))

	// run starts a container of a pod that runs to its end and returns its output.
	run := func(id string, opts []oci.SpecOpts, args ...string) string {
		t.Helper()
		tk := start(id, opts, args...)
		code, err := waitExit(t, id, tk.Exit, time.Minute)
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v; stdout %q, stderr %q", id, code, err, tk.Stdout(), tk.Stderr())
		}
		deleteTask(ctx, t, tk)
		return tk.Stdout()
	}
	t.Run("pod B reaches pod A's endpoint", func(t *testing.T) {
		out := run("net-pod-b-client", inPod("net-pod-b", "container", nsB), "connect", "10.252.0.10:8080", "from pod B")
		if out != "echo: from pod B\n" {
			t.Errorf("pod B's client printed %q", out)
		}
	})
	t.Run("pod A's containers share localhost", func(t *testing.T) {
		out := run("net-pod-a-client", inPod("net-pod-a", "container", nsA), "connect", "127.0.0.1:8080", "from pod A")
		if out != "echo: from pod A\n" {
			t.Errorf("pod A's second container printed %q", out)
		}
	})
	t.Run("pod B has no listener on its own localhost", func(t *testing.T) {
		// The negative of the above: the namespaces are really separate.
		tk := start("net-pod-b-local", inPod("net-pod-b", "container", nsB), "connect", "127.0.0.1:8080", "nobody")
		code, err := waitExit(t, "net-pod-b-local", tk.Exit, time.Minute)
		if err != nil || code == 0 {
			t.Errorf("connect to pod B's own 127.0.0.1:8080: exit %d, %v, stdout %q; want a failure", code, err, tk.Stdout())
		}
		deleteTask(ctx, t, tk)
	})

	t.Run("DNS settings in the resolver file", func(t *testing.T) {
		// The endpoint's settings, with one suffix (Windows applies one); then the spec's own
		// windows.network.DNSSearchList, which the shim passes as the document's
		// Networking.DnsSearchList, as the search list.
		resolvers := func(out string) []string {
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					lines = append(lines, l)
				}
			}
			return lines
		}
		out := run("net-pod-b-dns", inPod("net-pod-b", "container", nsB), "read", `C:\etc\resolv.conf`)
		if got, want := resolvers(out), []string{"nameserver 10.10.10.10", "search pod-b.svc.cluster.local", "options ndots:1"}; !slices.Equal(got, want) {
			t.Errorf("pod B's resolver file: %q, want %q (whole file %q)", got, want, out)
		}
		searchList := append(inPod("net-pod-b", "container", nsB), func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
			s.Windows.Network.DNSSearchList = []string{"a.example", "b.example"}
			return nil
		})
		out = run("net-pod-b-dns-search", searchList, "read", `C:\etc\resolv.conf`)
		if got, want := resolvers(out), []string{"nameserver 10.10.10.10", "search a.example b.example", "options ndots:1"}; !slices.Equal(got, want) {
			t.Errorf("with the spec's DNSSearchList: %q, want %q (whole file %q)", got, want, out)
		}
		out = run("net-pod-a-dns", inPod("net-pod-a", "container", nsA), "read", `C:\etc\resolv.conf`)
		if got, want := resolvers(out), []string{"options ndots:1"}; !slices.Equal(got, want) {
			t.Errorf("pod A's endpoint has no DNS settings: %q, want %q", got, want)
		}
	})

	inHost := hostRunner(ctx, t, env)
	t.Run("the host reaches pod A", func(t *testing.T) {
		out, err := inHost("connect", "10.252.0.10:8080", "from the host")
		if err != nil || out != "echo: from the host\n" {
			t.Errorf("host → pod A: %q, %v", out, err)
		}
	})
	t.Run("hostPort mapping", func(t *testing.T) {
		// The host's address on the network (its gateway) at the mapped port.
		out, err := inHost("connect", "10.252.0.1:18080", "through the host port")
		if err != nil || out != "echo: through the host port\n" {
			t.Errorf("host port 18080 → pod A:8080: %q, %v", out, err)
		}
		// And at localhost: the network is a NAT one and the emulated host a Windows Server
		// 2022, whose WinNAT maps the host's own connections to 127.0.0.1 (from 1809; hcsemu's
		// hostReachOf has the sources).
		out, err = inHost("connect", "127.0.0.1:18080", "through localhost")
		if err != nil || out != "echo: through localhost\n" {
			t.Errorf("127.0.0.1:18080 → pod A:8080: %q, %v", out, err)
		}
	})
	t.Run("not in the machine's own namespace", func(t *testing.T) {
		// The pods' network exists only inside the emulator's namespaces.
		out, err := exec.Command("ip", "-o", "addr", "show").Output()
		if err != nil {
			t.Skipf("ip: %v", err)
		}
		if strings.Contains(string(out), "10.252.0.") {
			t.Errorf("the machine's own namespace has a pod address:\n%s", out)
		}
	})

	t.Run("endpoint list without a namespace", func(t *testing.T) {
		// A spec listing endpoints without a namespace: the shim makes one for them (as
		// hcsshim does) and removes it with the task, leaving the endpoint detached.
		ep, err := h.CreateEndpoint(ctx, network.Id, &hcn.HostComputeEndpoint{IpConfigurations: []hcn.IpConfig{{IpAddress: "10.252.0.30"}}})
		if err != nil {
			t.Fatal(err)
		}
		defer h.DeleteEndpoint(ctx, ep.Id)
		tk := start("net-endpoint-list", []oci.SpecOpts{func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
			s.Windows.Network = &specs.WindowsNetwork{EndpointList: []string{ep.Id}}
			return nil
		}}, "listen", "0.0.0.0:8080")
		if err := tk.WaitOutput(ctx, "listening"); err != nil {
			t.Fatal(err)
		}
		attached, err := h.GetEndpoint(ctx, ep.Id)
		if err != nil || attached.HostComputeNamespace == "" {
			t.Fatalf("the listed endpoint is in no namespace: %+v, %v", attached, err)
		}
		if out, err := inHost("connect", "10.252.0.30:8080", "to the listed endpoint"); err != nil || out != "echo: to the listed endpoint\n" {
			t.Errorf("host → listed endpoint: %q, %v", out, err)
		}
		deleteTask(ctx, t, tk)
		if after, err := h.GetEndpoint(ctx, ep.Id); err != nil || after.HostComputeNamespace != "" {
			t.Errorf("after the task's delete the endpoint is in namespace %q (%v)", after.HostComputeNamespace, err)
		}
		if _, err := h.GetNamespace(ctx, attached.HostComputeNamespace); !hns.IsNotFound(err) {
			t.Errorf("the shim's namespace %s is still there: %v", attached.HostComputeNamespace, err)
		}
	})

	// Tear down as CRI and CNI do: the pods' containers, then the endpoints (CNI DEL), the
	// namespaces, and here the network.
	for i := len(tasks) - 1; i >= 0; i-- {
		deleteTask(ctx, t, tasks[i])
	}
	for _, ns := range []string{nsA, nsB} {
		got, err := h.GetNamespace(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if _, cs := hns.NamespaceResources(got); len(cs) != 0 {
			t.Errorf("namespace %s still lists containers %q after their delete", ns, cs)
		}
	}
	for _, ep := range []string{epA, epB} {
		if err := h.DeleteEndpoint(ctx, ep); err != nil {
			t.Error(err)
		}
	}
	for _, ns := range []string{nsA, nsB} {
		if err := h.DeleteNamespace(ctx, ns); err != nil {
			t.Error(err)
		}
	}
	if err := h.DeleteNetwork(ctx, network.Id); err != nil {
		t.Error(err)
	}
	checkNoNetworkLeft(ctx, t, env, h)
}

// hostRunner returns a function that runs the workload program with args in the emulated
// host's network namespace (hcsemu hostns) and returns its output.
func hostRunner(ctx context.Context, t *testing.T, env *harness.Env) func(args ...string) (string, error) {
	t.Helper()
	workloadBin := filepath.Join(t.TempDir(), "workload")
	b, err := harness.Workload()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(workloadBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	hcsemuRoot := filepath.Join(env.Root, "hcsemu")
	return func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, env.Bin.HCSEmu, append([]string{"hostns", "--root", hcsemuRoot, "--", workloadBin}, args...)...)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), &hostError{err, string(ee.Stderr)}
		}
		return string(out), err
	}
}

// checkNoNetworkLeft fails t if any HNS endpoint or namespace, network namespace file (but the
// emulated host's), mount of a task, or link in the emulated host but loopback is left.
func checkNoNetworkLeft(ctx context.Context, t *testing.T, env *harness.Env, h *hns.Client) {
	t.Helper()
	if eps, err := h.ListEndpoints(ctx, nil); err != nil || len(eps) != 0 {
		t.Errorf("HNS endpoints left: %+v, %v", eps, err)
	}
	if nss, err := h.ListNamespaces(ctx, nil); err != nil || len(nss) != 0 {
		t.Errorf("HNS namespaces left: %+v, %v", nss, err)
	}
	entries, err := os.ReadDir(layout.NetnsDir(env.HCSEmuRoot()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != layout.HostNetnsName {
			t.Errorf("network namespace file left: %s", e.Name())
		}
	}
	for _, m := range env.TaskMountsUnderRoot() {
		t.Errorf("still mounted: %s", m)
	}
	links, err := exec.Command("nsenter", "--net="+env.HostNetnsPath(), "ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(links)), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":") != "lo" {
			t.Errorf("link left in the emulated host: %s", l)
		}
	}
}

type hostError struct {
	err    error
	stderr string
}

func (e *hostError) Error() string { return e.err.Error() + ": " + strings.TrimSpace(e.stderr) }

// deleteTask kills (if needed) and deletes a task and its container now; the harness's cleanup
// of it is then a no-op.
func deleteTask(ctx context.Context, t *testing.T, tk *harness.Task) {
	t.Helper()
	if st, err := tk.Task.Status(ctx); err == nil && st.Status != containerd.Stopped {
		tk.Task.Kill(ctx, syscall.SIGKILL)
		waitExit(t, tk.Container.ID(), tk.Exit, time.Minute)
	}
	if _, err := tk.Task.Delete(ctx); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("delete task %s: %v", tk.Container.ID(), err)
	}
	if err := tk.Container.Delete(ctx, containerd.WithSnapshotCleanup); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("delete container %s: %v", tk.Container.ID(), err)
	}
}
