package hns

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Microsoft/hcsshim"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/testenv"
)

// cniPlugins is the folder of the pinned CNI plugins as Wine sees it (CNI_PATH).
func cniPlugins(t *testing.T) string {
	t.Helper()
	cniDir := os.Getenv("RUNHCS_WINE_CNI_PATH")
	if cniDir == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_CNI_PATH is not set: run the test through make test-windows as root")
		}
		t.Skip("no CNI plugins: make test-windows builds them and sets RUNHCS_WINE_CNI_PATH when run as root")
	}
	// A Linux path from test.sh; Wine shows the Linux root as Z:.
	return `Z:` + filepath.FromSlash(cniDir)
}

// winBridge returns a function that runs win-bridge as a runtime does: CNI_COMMAND, the
// network configuration on stdin, CNI_CONTAINERID and CNI_NETNS.
func winBridge(cniPath string, conf []byte, containerID, netns string) func(command string) ([]byte, error) {
	return func(command string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(cniPath, "win-bridge.exe"))
		cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netns,
			"CNI_IFNAME=eth0", "CNI_PATH="+cniPath)
		cmd.Stdin = bytes.NewReader(conf)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("win-bridge %s: %w: %s%s", command, err, out, stderr.Bytes())
		}
		return out, nil
	}
}

type cniResult struct {
	Interfaces []struct{ Name, Mac string }
	IPs        []struct{ Address, Gateway string }
}

// addResult runs ADD and checks its result: one interface, one address in subnet with the
// gateway gw.
func addResult(t *testing.T, run func(string) ([]byte, error), subnet, gw string) (cniResult, netip.Prefix) {
	t.Helper()
	out, err := run("ADD")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("win-bridge ADD: %s", bytes.TrimSpace(out))
	var result cniResult
	if err := json.Unmarshal(out, &result); err != nil {
		t.Fatalf("ADD's result %q: %v", out, err)
	}
	if len(result.IPs) != 1 || len(result.Interfaces) != 1 {
		t.Fatalf("ADD's result %s: want one IP and one interface", out)
	}
	addr, err := netip.ParsePrefix(result.IPs[0].Address)
	if err != nil || !netip.MustParsePrefix(subnet).Contains(addr.Addr()) || result.IPs[0].Gateway != gw {
		t.Fatalf("ADD's IP %+v (%v): want an address of %s with gateway %s", result.IPs[0], err, subnet, gw)
	}
	return result, addr
}

// TestWinBridgeV2 runs the Windows build of the pinned win-bridge CNI plugin
// (containernetworking/plugins, tools/cni) under Wine against the emulator's HNS, as containerd
// runs it for a pod: CNI_COMMAND ADD and DEL, the network configuration on stdin, CNI_NETNS the
// pod's HNS namespace, host-local as its IPAM. This is its ApiVersion 2 mode (hcsshim's hcn),
// the one for containerd. Its default (v1) mode is TestWinBridgeV1.
func TestWinBridgeV2(t *testing.T) {
	c := requireContract(t)
	cniPath := cniPlugins(t)

	// win-bridge takes the L2Bridge network by name, and its gateway at .2 of the IPAM's subnet
	// (it computes it so, for a bridge network).
	n := network(t, c, &hcn.HostComputeNetwork{
		Name: "winbridge-v2", Type: hcn.L2Bridge,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: "10.251.30.0/24",
			Routes:          []hcn.Route{{NextHop: "10.251.30.2", DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	})
	ns, err := c.CreateNamespace(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteNamespace(context.Background(), ns.Id) })

	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": "winbridge-v2", "type": "win-bridge", "apiVersion": 2,
		"ipMasqNetwork": "10.251.0.0/16",
		"capabilities":  map[string]any{"portMappings": true},
		"runtimeConfig": map[string]any{"portMappings": []any{
			map[string]any{"hostPort": 18100, "containerPort": 80, "protocol": "tcp"},
		}},
		"ipam": map[string]any{
			"type": "host-local", "dataDir": t.TempDir(),
			"ranges": []any{[]any{map[string]any{"subnet": "10.251.30.0/24", "rangeStart": "10.251.30.10", "rangeEnd": "10.251.30.50"}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const pod = "winbridge-pod-a"
	run := winBridge(cniPath, conf, pod, ns.Id)

	result, addr := addResult(t, run, "10.251.30.0/24", "10.251.30.2")

	// The endpoint it made: named after the pod and the network, on the network, in the pod's
	// namespace, with the result's address and MAC and the hostPort mapping.
	eps, err := c.ListEndpoints(ctx(t), Filter{"Name": pod + "_winbridge-v2"})
	if err != nil || len(eps) != 1 {
		t.Fatalf("endpoints named %s_winbridge-v2: %+v, %v; want one", pod, eps, err)
	}
	ep := eps[0]
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	if ep.HostComputeNetwork != n.Id || ep.HostComputeNamespace != ns.Id || ep.IpConfigurations[0].IpAddress != addr.Addr().String() || ep.MacAddress != result.Interfaces[0].Mac {
		t.Errorf("endpoint %+v; want on %s, in %s, with %s and %s", ep, n.Id, ns.Id, addr.Addr(), result.Interfaces[0].Mac)
	}
	var mapped bool
	for _, p := range ep.Policies {
		var s hcn.PortMappingPolicySetting
		if p.Type == hcn.PortMapping && json.Unmarshal(p.Settings, &s) == nil && s.ExternalPort == 18100 && s.InternalPort == 80 && s.Protocol == 6 {
			mapped = true
		}
	}
	if !mapped {
		t.Errorf("endpoint policies %+v: no PortMapping 18100 -> 80/tcp", ep.Policies)
	}
	if got, err := c.GetNamespace(ctx(t), ns.Id); err != nil {
		t.Fatal(err)
	} else if ids, _ := NamespaceResources(got); len(ids) != 1 || ids[0] != ep.Id {
		t.Errorf("namespace resources %+v; want the endpoint %s", got.Resources, ep.Id)
	}

	if _, err := run("DEL"); err != nil {
		t.Fatal(err)
	}
	if left, err := c.ListEndpoints(ctx(t), Filter{"VirtualNetwork": n.Id}); err != nil || len(left) != 0 {
		t.Errorf("after DEL, endpoints on the network: %+v, %v", left, err)
	}
	if got, err := c.GetNamespace(ctx(t), ns.Id); err != nil || len(got.Resources) != 0 {
		t.Errorf("after DEL, the namespace holds %+v (%v)", got.Resources, err)
	}
	// DEL again, as the runtime may retry it: nothing to do, no error.
	if _, err := run("DEL"); err != nil {
		t.Errorf("a second DEL: %v", err)
	}
}

// containerRoot gives the container id a root folder of its own, a copy of the test image
// beside it: containers that run at the same time have their own scratch on Windows, and
// hcsemu mounts each process-isolated container's process list in its root (C:\proc).
func containerRoot(t *testing.T, image, id string) string {
	t.Helper()
	root := path.Join(path.Dir(filepath.ToSlash(image)), "root-"+id)
	for _, f := range []string{"workload/workload.exe", "Windows/System32/workload.exe"} {
		b, err := os.ReadFile(`Z:` + filepath.FromSlash(path.Join(filepath.ToSlash(image), f)))
		if err != nil {
			t.Fatal(err)
		}
		dst := `Z:` + filepath.FromSlash(path.Join(root, f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(`Z:` + filepath.FromSlash(root)) })
	return root
}

// TestWinBridgeV1 runs win-bridge in its default mode (no ApiVersion: hcsshim's v1 HNS
// functions) as dockershim ran it: after the pod's sandbox container exists, with CNI_NETNS
// "none" and CNI_CONTAINERID the container, whereupon win-bridge creates the endpoint and
// attaches it to the container through HCS v1 (hcsshim.HotAttachEndpoint: vmcompute.dll's
// HcsOpenComputeSystem, HcsRegisterComputeSystemCallback, HcsGetComputeSystemProperties,
// HcsModifyComputeSystem with a v1 Network request, HcsUnregisterComputeSystemCallback and
// HcsCloseComputeSystem, served by the stand-in vmcompute.dll over the stand-in computecore.dll).
// (With containerd's convention, CNI_NETNS an HNS namespace before the container exists, this
// mode looks for an endpoint that is not there and fails: it is dockershim's.) The emulator
// attaches the endpoint to the HNS namespace the container runs in, so a server the container
// already runs is reached at the returned address from another pod (win-bridge's ApiVersion 2
// mode, containerd's order), through its hostPort mapping at the host's address from that pod,
// and from the emulated host (hcsemu hostns) at its address but not through the mapping
// (L2Bridge without LocalRoutedVip: hcsemu's hostReachOf). A second container of the pod (CNI_NETNS
// "container:<sandbox>") gets the same endpoint. DEL detaches and deletes the endpoint; a
// second DEL is a no-op.
// ADD for a container that does not exist, or that runs processes outside any network
// namespace, fails and leaves no endpoint.
func TestWinBridgeV1(t *testing.T) {
	c := requireContract(t)
	cniPath := cniPlugins(t)
	image := os.Getenv("RUNHCS_WINE_IMAGE")
	if image == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_IMAGE is not set: run the test through make test-windows as root")
		}
		t.Skip("no test image: make test-windows sets RUNHCS_WINE_IMAGE when run as root")
	}
	const netName, subnet, gw = "winbridge-v1", "10.251.31.0/24", "10.251.31.2"
	n := network(t, c, &hcn.HostComputeNetwork{
		Name: netName, Type: hcn.L2Bridge,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: subnet,
			Routes:          []hcn.Route{{NextHop: gw, DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	})
	ipamDir := t.TempDir() // one host-local store: both modes' pods get distinct addresses
	// conf is the network configuration; pod A's maps hostPort 18101 (a host port is mapped
	// to one endpoint only).
	conf := func(apiVersion int, hostPort bool) []byte {
		m := map[string]any{
			"cniVersion": "1.0.0", "name": netName, "type": "win-bridge",
			"capabilities": map[string]any{"portMappings": true},
			"ipam": map[string]any{
				"type": "host-local", "dataDir": ipamDir,
				"ranges": []any{[]any{map[string]any{"subnet": subnet, "rangeStart": "10.251.31.10", "rangeEnd": "10.251.31.50"}}},
			},
		}
		if apiVersion != 0 {
			m["apiVersion"] = apiVersion
		}
		if hostPort {
			m["runtimeConfig"] = map[string]any{"portMappings": []any{map[string]any{"hostPort": 18101, "containerPort": 8080, "protocol": "tcp"}}}
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	namespace := func() string {
		ns, err := c.CreateNamespace(ctx(t), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.DeleteNamespace(context.Background(), ns.Id) })
		return ns.Id
	}
	hcsc := hcs.NewHostClient()
	hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	container := func(id, ns string, start bool) *hcs.System {
		v := schema2.SchemaV21
		doc := &schema2.ComputeSystem{Owner: "winbridge-v1", SchemaVersion: &v, Container: &schema2.Container{Storage: &schema2.Storage{Path: containerRoot(t, image, id)}}}
		if ns != "" {
			doc.Container.Networking = &schema2.Networking{Namespace: ns}
		}
		s, err := hcsc.CreateComputeSystem(hctx, id, doc)
		if err != nil {
			t.Fatalf("create container %s: %v", id, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Terminate(ctx); err != nil && !errors.Is(err, hcs.ErrAlreadyStopped) && !errors.Is(err, hcs.ErrNotFound) {
				t.Errorf("cleanup: terminate %s: %v", id, err)
			}
			s.Close()
		})
		if start {
			if err := s.Start(hctx); err != nil {
				t.Fatalf("start %s: %v", id, err)
			}
		}
		return s
	}
	endpointsNamed := func(name string) []hcn.HostComputeEndpoint {
		eps, err := c.ListEndpoints(ctx(t), Filter{"Name": name})
		if err != nil {
			t.Fatal(err)
		}
		return eps
	}

	// Pod A: its sandbox container runs an echo server, in its HNS namespace (which has no
	// endpoint yet), before the plugin is called.
	const podA = "winbridge-v1-pod-a"
	nsA := namespace()
	a := container(podA, nsA, true)
	server, err := a.CreateProcess(hctx, &schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe listen 0.0.0.0:8080`, CreateStdOutPipe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	_, serverOut, _ := server.Stdio()
	if line, err := bufio.NewReader(serverOut).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("pod A's server: %q, %v", line, err)
	}

	runA := winBridge(cniPath, conf(0, true), podA, "none")
	result, addr := addResult(t, runA, subnet, gw)
	eps := endpointsNamed(podA + "_" + netName)
	if len(eps) != 1 {
		t.Fatalf("endpoints named %s_%s: %+v; want one", podA, netName, eps)
	}
	ep := eps[0]
	t.Cleanup(func() { c.DeleteEndpoint(context.Background(), ep.Id) })
	if ep.HostComputeNetwork != n.Id || ep.HostComputeNamespace != nsA || ep.IpConfigurations[0].IpAddress != addr.Addr().String() || ep.MacAddress != result.Interfaces[0].Mac {
		t.Errorf("endpoint %+v; want on %s, in pod A's namespace %s, with %s and %s", ep, n.Id, nsA, addr.Addr(), result.Interfaces[0].Mac)
	}
	// Attached, as the plugin's own check sees it (hcsshim's IsAttached reads v1's
	// SharedContainers), with the hostPort mapping as a v1 NAT policy.
	v1, err := hcsshim.GetHNSEndpointByName(podA + "_" + netName)
	if err != nil {
		t.Fatal(err)
	}
	if attached, err := v1.IsAttached(podA); err != nil || !attached {
		t.Errorf("IsAttached(%s): %v, %v; SharedContainers %v", podA, attached, err, v1.SharedContainers)
	}
	if !strings.Contains(string(mustJSON(t, v1.Policies)), `"ExternalPort":18101`) {
		t.Errorf("v1 policies %s: no NAT policy for hostPort 18101", mustJSON(t, v1.Policies))
	}

	// A second container of pod A, as dockershim added one (CNI_NETNS "container:<sandbox>"):
	// it runs in the pod's namespace, so the plugin finds the sandbox's endpoint attached to it
	// already (v1 SharedContainers) and returns the same address; its DEL leaves the endpoint
	// to the sandbox.
	const appA = "winbridge-v1-pod-a-app"
	container(appA, nsA, true)
	runApp := winBridge(cniPath, conf(0, true), appA, "container:"+podA)
	if _, appAddr := addResult(t, runApp, subnet, gw); appAddr != addr {
		t.Errorf("the second container's ADD returned %s; want the sandbox's %s", appAddr, addr)
	}
	if _, err := runApp("DEL"); err != nil {
		t.Errorf("the second container's DEL: %v", err)
	}
	if eps := endpointsNamed(podA + "_" + netName); len(eps) != 1 || eps[0].HostComputeNamespace != nsA {
		t.Errorf("after the second container's DEL, pod A's endpoint: %+v; want it still in %s", eps, nsA)
	}

	// Pod B, containerd's way (ApiVersion 2: its namespace first, then its container), reaches
	// pod A's server at the address ADD returned.
	const podB = "winbridge-v1-pod-b"
	nsB := namespace()
	runB := winBridge(cniPath, conf(2, false), podB, nsB)
	addResult(t, runB, subnet, gw)
	t.Cleanup(func() { runB("DEL") })
	b := container(podB, nsB, true)
	// A container ends with its last process: one keeps pod B up for the clients below.
	keeper, err := b.CreateProcess(hctx, &schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 600`})
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Close()
	// Pod A's address, and the hostPort mapping at the host's address on the network (its
	// gateway), as another pod of the node reaches a hostPort.
	for _, target := range []string{addr.Addr().String() + ":8080", gw + ":18101"} {
		client, err := b.CreateProcess(hctx, &schema2.ProcessParameters{
			CommandLine: fmt.Sprintf(`C:\workload\workload.exe connect %s from-pod-b`, target), CreateStdOutPipe: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		_, clientOut, _ := client.Stdio()
		got, _ := bufio.NewReader(clientOut).ReadString('\n')
		<-client.Exited()
		if code, err := client.ExitCode(); got != "echo: from-pod-b\n" || code != 0 || err != nil {
			t.Errorf("pod B → %s (pod A): %q, exit %d (%v); want the echo", target, got, code, err)
		}
		client.Close()
	}

	// The emulated host reaches pod A at its address, as kubelet's probes do on a Windows
	// node, but not through the hostPort mapping: on an L2Bridge network the mapping is a VFP
	// policy, which the host's own connections reach only when it carries the LocalRoutedVip
	// flag, and win-bridge sets none (hcsemu's hostReachOf has the sources).
	host := hostNamespace(t, image)
	workload := filepath.ToSlash(filepath.Join(image, "workload", "workload.exe"))
	if out, err := host(workload, "connect", addr.Addr().String()+":8080", "from-the-host"); err != nil || out != "echo: from-the-host\n" {
		t.Errorf("emulated host → %s:8080: %q, %v; want the echo", addr.Addr(), out, err)
	}
	for _, target := range []string{gw + ":18101", "127.0.0.1:18101"} {
		if out, err := host(workload, "connect", target, "from-the-host"); err == nil || out == "echo: from-the-host\n" {
			t.Errorf("emulated host → %s: %q, %v; want no answer (L2Bridge without LocalRoutedVip)", target, out, err)
		}
	}

	// DEL: detached and deleted; the namespace holds only its container again.
	if _, err := runA("DEL"); err != nil {
		t.Fatal(err)
	}
	if left := endpointsNamed(podA + "_" + netName); len(left) != 0 {
		t.Errorf("after DEL, pod A's endpoint: %+v", left)
	}
	if got, err := c.GetNamespace(ctx(t), nsA); err != nil {
		t.Fatal(err)
	} else if eps, _ := NamespaceResources(got); len(eps) != 0 {
		t.Errorf("after DEL, pod A's namespace holds endpoints %v", eps)
	}
	if _, err := runA("DEL"); err != nil {
		t.Errorf("a second DEL: %v", err)
	}

	// Refused, leaving no endpoint: a container that does not exist (hcsshim sees
	// ErrComputeSystemDoesNotExist and the plugin removes the endpoint it made), and one
	// without a network namespace whose processes already run (in the daemon's own network
	// namespace, which the emulator puts no endpoint in).
	const missing = "winbridge-v1-missing"
	if out, err := winBridge(cniPath, conf(0, false), missing, "none")("ADD"); err == nil {
		t.Errorf("ADD for a container that does not exist succeeded: %s", out)
	} else if !strings.Contains(err.Error(), "3224830222") {
		// 0xC037010E: vmcompute.dll's HCS_E_SYSTEM_NOT_FOUND, hcsshim's ErrComputeSystemDoesNotExist.
		t.Errorf("ADD for a container that does not exist: %v; want HcsOpenComputeSystem's 0xC037010E", err)
	}
	if left := endpointsNamed(missing + "_" + netName); len(left) != 0 {
		t.Errorf("ADD for a missing container left %+v", left)
	}
	const bare = "winbridge-v1-bare"
	sleeper, err := container(bare, "", true).CreateProcess(hctx, &schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 300`})
	if err != nil {
		t.Fatal(err)
	}
	defer sleeper.Close()
	if out, err := winBridge(cniPath, conf(0, false), bare, "none")("ADD"); err == nil {
		t.Errorf("ADD for a container without a network namespace succeeded: %s", out)
	} else if !strings.Contains(err.Error(), "Not implemented") {
		t.Errorf("ADD for a container without a network namespace: %v; want E_NOTIMPL", err)
	}
	if left := endpointsNamed(bare + "_" + netName); len(left) != 0 {
		t.Errorf("ADD for a container without a namespace left %+v", left)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostNamespace returns a function that runs a Linux program in the emulated Windows host's
// network namespace (hcsemu hostns), where the pods' networks are reached as from a Windows
// node, and returns its output. test.sh names hcsemu in RUNHCS_WINE_HCSEMU (a Linux path, under
// a name ending in .exe, which os/exec needs on Windows) and its root in
// RUNHCS_WINE_HCSEMU_ROOT. Wine runs a program that is not a PE image as a native process
// (ntdll's fork_and_exec), but gives the caller no handle to wait on (observed with Wine 8:
// WaitForSingleObject fails with "Invalid handle"); so the program runs under /bin/sh, which
// writes its output and then its exit status into files beside the test image, and the test
// waits for the status file.
func hostNamespace(t *testing.T, image string) func(program string, args ...string) (string, error) {
	t.Helper()
	hcsemu, root := os.Getenv("RUNHCS_WINE_HCSEMU"), os.Getenv("RUNHCS_WINE_HCSEMU_ROOT")
	if hcsemu == "" || root == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_HCSEMU and RUNHCS_WINE_HCSEMU_ROOT are not set: run the test through make test-windows as root")
		}
		t.Skip("no emulator to enter: make test-windows sets RUNHCS_WINE_HCSEMU when run as root")
	}
	dir := path.Join(path.Dir(filepath.ToSlash(image)), "hostns-"+t.Name())
	local := `Z:` + filepath.FromSlash(dir)
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(local) })
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	n := 0
	return func(program string, args ...string) (string, error) {
		n++
		out, status := path.Join(dir, fmt.Sprintf("%d.out", n)), path.Join(dir, fmt.Sprintf("%d.status", n))
		script := quote(program)
		for _, a := range args {
			script += " " + quote(a)
		}
		script += fmt.Sprintf(" >%s 2>&1; echo $? >%s.tmp && mv %s.tmp %s", quote(out), quote(status), quote(status), quote(status))
		cmd := exec.Command(`Z:`+filepath.FromSlash(hcsemu), "hostns", "--root", root, "--", "/bin/sh", "-c", script)
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("hcsemu hostns: %w", err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			b, err := os.ReadFile(`Z:` + filepath.FromSlash(status))
			if err == nil {
				got, _ := os.ReadFile(`Z:` + filepath.FromSlash(out))
				if code := strings.TrimSpace(string(b)); code != "0" {
					return string(got), fmt.Errorf("%s %v in the emulated host: exit status %s", program, args, code)
				}
				return string(got), nil
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("%s %v in the emulated host: no exit status after 90 s", program, args)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
