package hns

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/testenv"
)

// TestWinBridgeV2 runs the Windows build of the pinned win-bridge CNI plugin
// (containernetworking/plugins, tools/cni) under Wine against the emulator's HNS, as containerd
// runs it for a pod: CNI_COMMAND ADD and DEL, the network configuration on stdin, CNI_NETNS the
// pod's HNS namespace, host-local as its IPAM. This is its ApiVersion 2 mode (hcsshim's hcn),
// the one for containerd. Its default (v1) mode attaches the endpoint to the pod's container
// through HCS v1 (hcsshim.HotAttachEndpoint: vmcompute.dll's HcsOpenComputeSystem and
// HcsModifyComputeSystem), which the stand-in vmcompute.dll does not have yet, so it is not run.
func TestWinBridgeV2(t *testing.T) {
	c := requireContract(t)
	cniDir := os.Getenv("RUNHCS_WINE_CNI_PATH")
	if cniDir == "" {
		if testenv.InCI() {
			t.Fatal("RUNHCS_WINE_CNI_PATH is not set: run the test through make test-windows as root")
		}
		t.Skip("no CNI plugins: make test-windows builds them and sets RUNHCS_WINE_CNI_PATH when run as root")
	}
	// A Linux path from test.sh; Wine shows the Linux root as Z:.
	cniPath := `Z:` + filepath.FromSlash(cniDir)

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
	run := func(command string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(cniPath, "win-bridge.exe"))
		cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+pod, "CNI_NETNS="+ns.Id,
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

	out, err := run("ADD")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("win-bridge ADD: %s", bytes.TrimSpace(out))
	var result struct {
		Interfaces []struct{ Name, Mac string }
		IPs        []struct{ Address, Gateway string }
	}
	if err := json.Unmarshal(out, &result); err != nil {
		t.Fatalf("ADD's result %q: %v", out, err)
	}
	if len(result.IPs) != 1 || len(result.Interfaces) != 1 {
		t.Fatalf("ADD's result %s: want one IP and one interface", out)
	}
	addr, err := netip.ParsePrefix(result.IPs[0].Address)
	if err != nil || !netip.MustParsePrefix("10.251.30.0/24").Contains(addr.Addr()) || result.IPs[0].Gateway != "10.251.30.2" {
		t.Fatalf("ADD's IP %+v (%v): want an address of 10.251.30.0/24 with gateway 10.251.30.2", result.IPs[0], err)
	}

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
