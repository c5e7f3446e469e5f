package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/protocols/options"
	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// TestHyperVPodNetworking: a Hyper-V pod (its utility VM, a server container and a client
// container hosted in it) and a process-isolated pod on one HNS network that the test makes as
// a CNI plugin would. The pod's endpoint becomes a NIC of its VM (the shim adds the pod's
// namespace and its endpoints to the VM as hcsshim does); the process-isolated pod reaches the
// Hyper-V pod's server over TCP at its endpoint address, the Hyper-V pod's second container
// reaches it over 127.0.0.1, and so does the emulated host at the endpoint address. When the
// pod is deleted its endpoint is back in its HNS namespace and the VM's network namespace is
// gone; after the HNS objects are deleted nothing of the network is left.
func TestHyperVPodNetworking(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 10*time.Minute)
	defer cancel()
	pause := hvImage(t, env, "net-pause", image.DefaultOSVersion, true)
	hv := &options.Options{SandboxIsolation: options.Options_HYPERVISOR}

	api, err := client.DialHNS(env.HCSEmuAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	h := hns.NewClient(api)
	network, err := h.CreateNetwork(ctx, &hcn.HostComputeNetwork{
		Name: "e2e-hv-pods", Type: hcn.NAT,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: "10.251.0.0/24",
			Routes:          []hcn.Route{{NextHop: "10.251.0.1", DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	podNet := func(name, ip string) (nsID, epID string) {
		t.Helper()
		ns, err := h.CreateNamespace(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		ep, err := h.CreateEndpoint(ctx, network.Id, &hcn.HostComputeEndpoint{Name: name, IpConfigurations: []hcn.IpConfig{{IpAddress: ip, PrefixLength: 24}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddNamespaceEndpoint(ctx, ns.Id, ep.Id); err != nil {
			t.Fatal(err)
		}
		return ns.Id, ep.Id
	}
	nsA, epA := podNet("hv-pod_eth0", "10.251.0.10")
	nsB, epB := podNet("proc-pod_eth0", "10.251.0.20")

	inPod := func(sandbox, kind, ns string) []oci.SpecOpts {
		return []oci.SpecOpts{
			oci.WithAnnotations(map[string]string{"io.kubernetes.cri.sandbox-id": sandbox, "io.kubernetes.cri.container-type": kind}),
			func(_ context.Context, _ oci.Client, _ *containers.Container, s *specs.Spec) error {
				if s.Windows == nil {
					s.Windows = &specs.Windows{}
				}
				s.Windows.Network = &specs.WindowsNetwork{NetworkNamespace: ns}
				return nil
			},
		}
	}
	start := func(run harness.TaskRun) *harness.Task {
		t.Helper()
		tk, err := env.StartTask(ctx, t, run)
		if err != nil {
			t.Fatalf("%s: %v", run.ID, err)
		}
		return tk
	}
	hvRun := func(id, kind string, args ...string) harness.TaskRun {
		r := harness.TaskRun{ID: id, Image: pause, RuntimeOptions: hv, SpecOpts: inPod("hvnet-pod", kind, nsA)}
		if args != nil {
			r.Args = workload(args...)
		}
		return r
	}
	// run starts a container that runs to its end and returns its output.
	run := func(r harness.TaskRun) string {
		t.Helper()
		tk := start(r)
		code, err := waitExit(t, r.ID, tk.Exit, 2*time.Minute)
		if err != nil || code != 0 {
			t.Errorf("%s: exit %d, %v; stdout %q, stderr %q", r.ID, code, err, tk.Stdout(), tk.Stderr())
		}
		deleteTask(ctx, t, tk)
		return tk.Stdout()
	}

	sandbox := start(hvRun("hvnet-pod", "sandbox"))
	// The sandbox's pid is 0 and the harness's cleanup cannot kill it (TestHyperV says why);
	// this runs after ctx is cancelled, so on a context of its own (a no-op once deleted).
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(harness.Context(context.Background()), time.Minute)
		defer cancel()
		deleteTask(cctx, t, sandbox)
	})
	// Its endpoint is now a NIC of the VM: the endpoint's link left the HNS namespace, and it
	// is still in that namespace as an HNS object.
	netnsDir := layout.NetnsDir(env.HCSEmuRoot())
	nsFile := layout.NamespaceNetns(env.HCSEmuRoot(), nsA)
	linksIn := func(netnsFile string) string {
		t.Helper()
		out, err := exec.Command("nsenter", "--net="+netnsFile, "ip", "-o", "link", "show").Output()
		if err != nil {
			t.Fatalf("links of %s: %v", netnsFile, err)
		}
		return string(out)
	}
	if l := linksIn(nsFile); strings.Contains(l, "eth0") {
		t.Errorf("the pod's HNS namespace still has the endpoint's link while it is the VM's NIC:\n%s", l)
	}
	if ep, err := h.GetEndpoint(ctx, epA); err != nil || !strings.EqualFold(ep.HostComputeNamespace, nsA) {
		t.Errorf("the pod's endpoint: %+v, %v; want it still in namespace %s", ep, err, nsA)
	}

	server := start(hvRun("hvnet-server", "container", "listen", "0.0.0.0:8080"))
	if err := server.WaitOutput(ctx, "listening"); err != nil {
		t.Fatal(err)
	}
	procPod := start(harness.TaskRun{ID: "procnet-pod", Args: workload("sleep", "600"), SpecOpts: inPod("procnet-pod", "sandbox", nsB)})

	t.Run("a process-isolated pod reaches the Hyper-V pod's endpoint", func(t *testing.T) {
		out := run(harness.TaskRun{ID: "procnet-client", Args: workload("connect", "10.251.0.10:8080", "from the process-isolated pod"), SpecOpts: inPod("procnet-pod", "container", nsB)})
		if out != "echo: from the process-isolated pod\n" {
			t.Errorf("the process-isolated pod's client printed %q", out)
		}
	})
	t.Run("the Hyper-V pod's containers share localhost", func(t *testing.T) {
		out := run(hvRun("hvnet-client", "container", "connect", "127.0.0.1:8080", "from the same pod"))
		if out != "echo: from the same pod\n" {
			t.Errorf("the Hyper-V pod's second container printed %q", out)
		}
	})
	t.Run("the emulated host reaches the Hyper-V pod", func(t *testing.T) {
		out, err := hostRunner(ctx, t, env)("connect", "10.251.0.10:8080", "from the host")
		if err != nil || out != "echo: from the host\n" {
			t.Errorf("host → Hyper-V pod: %q, %v", out, err)
		}
	})

	// Delete the pod as CRI does (containers, then the sandbox, which stops the VM): the
	// endpoint's link is back in its HNS namespace, the VM's network namespace is gone.
	deleteTask(ctx, t, server)
	deleteTask(ctx, t, sandbox)
	if l := linksIn(nsFile); !strings.Contains(l, "eth0") {
		t.Errorf("after the pod's delete its HNS namespace has no eth0 again:\n%s", l)
	}
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), layout.VMNetnsPrefix) {
			t.Errorf("a VM's network namespace is left: %s", e.Name())
		}
	}
	deleteTask(ctx, t, procPod)

	// CNI DEL and CRI's namespace removal, then the network: nothing is left.
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
