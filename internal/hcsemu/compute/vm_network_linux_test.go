package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// links lists the links of the network namespace file path other than loopback, with their
// IPv4 addresses.
func links(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := hns.InNetns(path, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		ls, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, l := range ls {
			if l.Attrs().Name == "lo" {
				continue
			}
			addrs, _ := h.AddrList(l, netlink.FAMILY_V4)
			var as []string
			for _, a := range addrs {
				as = append(as, a.IPNet.String())
			}
			out[l.Attrs().Name+" "+l.Attrs().HardwareAddr.String()] = as
		}
		return nil
	})
	if err != nil {
		t.Fatalf("links of %s: %v", path, err)
	}
	return out
}

func nicRequest(rt schema2.RequestType, nic, ep string, guest any) schema2.ModifySettingRequest {
	r := schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathNetworkAdapterFormat, nic), RequestType: rt,
		Settings: schema2.NetworkAdapter{EndpointId: ep}}
	if guest != nil {
		r.GuestRequest = guest
	}
	return r
}

// TestVMNetworking: a VM's own network namespace, an HNS endpoint plugged in as its NIC through
// hcsshim's sequence (NetworkNamespace, PreAdd, host Add + guest Add), hosted containers in the
// VM's namespace reached from the emulated host and over localhost, the bad requests, and the
// NIC back in its HNS namespace when the VM stops.
func TestVMNetworking(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	h := e.hns
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("vm-net", "10.252.0.0/24", "10.252.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"IpConfigurations":[{"IpAddress":"10.252.0.7"}],"Dns":{"Search":["google.com"],"ServerList":["10.10.10.10"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	otherEP, err := h.CreateEndpoint(ctx, netID, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	nsID, err := h.CreateNamespace(ctx, "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ModifyNamespace(ctx, nsID, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, epID)); err != nil {
		t.Fatal(err)
	}
	nsPath := filepath.Join(e.cfg.Root, "netns", nsID)

	vmSub, layer := startVM(t, e, "pod@vm", "10.0.20348.1", 128)
	vmSys, err := e.lookup(wire.SystemRef{ID: "pod@vm"})
	if err != nil {
		t.Fatal(err)
	}
	vmNetns := vmSys.vm.net.path
	vmSys.mu.Unlock()
	if got := links(t, vmNetns); len(got) != 0 {
		t.Errorf("a new VM's network namespace has %v, want loopback only", got)
	}

	// hcsshim's AddNetNS: the guest learns the pod's namespace (the HNS document as it is).
	var nsDoc hcn.HostComputeNamespace
	d, _ := h.QueryNamespace(ctx, nsID, "")
	json.Unmarshal([]byte(d), &nsDoc)
	if err := modify(e, "pod@vm", schema2.ModifySettingRequest{GuestRequest: schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeNetworkNamespace, RequestType: schema2.RequestTypeAdd, Settings: nsDoc}}); err != nil {
		t.Fatalf("NetworkNamespace Add: %v", err)
	}

	// Refused, naming the field, leaving nothing.
	for _, c := range []struct {
		name string
		req  schema2.ModifySettingRequest
		want string
	}{
		{"unknown endpoint", nicRequest(schema2.RequestTypeAdd, "nic9", "5b0d4c3e-1f2a-4b5c-8d6e-7f8091a2b3c4", nil), "Settings.EndpointId"},
		{"no endpoint", schema2.ModifySettingRequest{ResourcePath: nicPathPrefix + "nic9", RequestType: schema2.RequestTypeAdd, Settings: schema2.NetworkAdapter{}}, "Settings.EndpointId"},
		{"wrong MAC", schema2.ModifySettingRequest{ResourcePath: nicPathPrefix + "nic9", RequestType: schema2.RequestTypeAdd,
			Settings: schema2.NetworkAdapter{EndpointId: epID, MacAddress: "00-15-5D-99-99-99"}}, "Settings.MacAddress"},
		{"guest Add without PreAdd", nicRequest(schema2.RequestTypeAdd, "nic9", epID, schema2.GuestModifySettingRequest{ResourceType: schema2.ResourceTypeNetwork,
			RequestType: schema2.RequestTypeAdd, Settings: networkModifyRequest{AdapterId: "nic9", RequestType: schema2.RequestTypeAdd}}), "GuestRequest.Settings.AdapterId"},
	} {
		if err := modify(e, "pod@vm", c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
		if got := links(t, vmNetns); len(got) != 0 {
			t.Errorf("%s: the VM has %v after a refused NIC", c.name, got)
		}
		if got := links(t, nsPath); len(got) != 1 {
			t.Errorf("%s: the endpoint's namespace has %v, want its eth0 still there", c.name, got)
		}
	}

	// hcsshim's addNIC: PreAdd (guest only, the endpoint), then host Add with guest Add.
	var epDoc hcn.HostComputeEndpoint
	d, _ = h.QueryEndpoint(ctx, epID, "")
	json.Unmarshal([]byte(d), &epDoc)
	preAdd := schema2.ModifySettingRequest{GuestRequest: schema2.GuestModifySettingRequest{ResourceType: schema2.ResourceTypeNetwork, RequestType: schema2.RequestTypeAdd,
		Settings: map[string]any{"AdapterId": "nic0", "RequestType": "PreAdd", "Settings": epDoc}}}
	if err := modify(e, "pod@vm", preAdd); err != nil {
		t.Fatalf("PreAdd: %v", err)
	}
	add := nicRequest(schema2.RequestTypeAdd, "nic0", epID, schema2.GuestModifySettingRequest{ResourceType: schema2.ResourceTypeNetwork, RequestType: schema2.RequestTypeAdd,
		Settings: networkModifyRequest{AdapterId: "nic0", RequestType: schema2.RequestTypeAdd}})
	add.Settings = schema2.NetworkAdapter{EndpointId: epID, MacAddress: epDoc.MacAddress}
	if err := modify(e, "pod@vm", add); err != nil {
		t.Fatalf("NIC Add: %v", err)
	}
	mac := strings.ToLower(strings.ReplaceAll(epDoc.MacAddress, "-", ":"))
	if got := links(t, vmNetns); len(got) != 1 || strings.Join(got["eth0 "+mac], ",") != "10.252.0.7/24" {
		t.Errorf("the VM's links: %v, want eth0 %s with 10.252.0.7/24", got, mac)
	}
	if got := links(t, nsPath); len(got) != 0 {
		t.Errorf("the endpoint's HNS namespace still has %v: the link should have moved into the VM", got)
	}
	if err := modify(e, "pod@vm", nicRequest(schema2.RequestTypeAdd, "nic0", otherEP, nil)); err == nil || !strings.Contains(err.Error(), "ResourcePath") {
		t.Errorf("a second NIC with the id nic0: %v, want an error naming the ResourcePath", err)
	}
	if err := modify(e, "pod@vm", nicRequest(schema2.RequestTypeAdd, "nic1", epID, nil)); err == nil || !strings.Contains(err.Error(), "Settings.EndpointId") || !strings.Contains(err.Error(), "already") {
		t.Errorf("the same endpoint as a second NIC: %v, want an error naming Settings.EndpointId", err)
	}
	if err := h.ModifyNamespace(ctx, nsID, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, otherEP)); err != nil {
		t.Fatal(err)
	}

	// Hosted containers run in the VM's namespace: one that names the pod's namespace is
	// reached from the emulated host at the endpoint's address and from the VM over localhost.
	c1 := newRecorder()
	if _, err := hostContainerIn(t, e, "pod@vm", "web", layer, c1, &schema2.Networking{Namespace: nsID}); err != nil {
		t.Fatalf("hosted container in the pod's namespace: %v", err)
	}
	server := runInBackground(t, e, "web", `C:\workload\workload.exe listen 0.0.0.0:7000`)
	// It sees the DNS settings of the VM's NIC (hns dns.go): a Hyper-V pod's containers share its
	// adapters.
	if code, out := runIn(t, e, "web", `C:\workload\workload.exe read C:\etc\resolv.conf`); code != 0 ||
		!strings.Contains(out, "# hcsemu-adapter "+epDoc.MacAddress+" suffix=google.com servers=10.10.10.10\n") ||
		!strings.HasSuffix(out, "nameserver 10.10.10.10\nsearch google.com\noptions ndots:1\n") {
		t.Errorf("C:\\etc\\resolv.conf in a hosted container: exit code %d\n%s", code, out)
	}
	var answer string
	deadline := time.Now().Add(60 * time.Second)
	for {
		err = hns.InNetns(hns.HostNetnsPath(e.cfg.Root), func() error {
			c, err := net.DialTimeout("tcp", "10.252.0.7:7000", 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "ping\n")
			answer, err = bufio.NewReader(c).ReadString('\n')
			return err
		})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the server may not listen yet
	}
	if err != nil || answer != "echo: ping\n" {
		t.Errorf("emulated host → hosted container at the NIC's address: %q, %v", answer, err)
	}
	// The NIC's endpoint counts that exchange (GET /endpointstats, a Hyper-V pod's network
	// stats in containerd's CRI).
	var stats struct {
		Success bool
		Output  hcn.EndpointStats
	}
	if err := json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpointstats/"+epID, "")), &stats); err != nil {
		t.Fatal(err)
	}
	if st := stats.Output; !stats.Success || st.BytesReceived == 0 || st.BytesSent == 0 {
		t.Errorf("stats of the VM NIC's endpoint after an exchange: %+v", stats)
	}
	c2 := newRecorder()
	if _, err := hostContainerIn(t, e, "pod@vm", "side", layer, c2, &schema2.Networking{Namespace: nsID}); err != nil {
		t.Fatalf("second hosted container: %v", err)
	}
	if code, out := runIn(t, e, "side", `C:\workload\workload.exe connect 127.0.0.1:7000 local`); code != 0 || !strings.Contains(out, "echo: local") {
		t.Errorf("second container → first over 127.0.0.1: exit %d, %q", code, out)
	}
	if _, err := hostContainerIn(t, e, "pod@vm", "stranger", layer, newRecorder(), &schema2.Networking{Namespace: otherEP}); err == nil ||
		!strings.Contains(err.Error(), "Container.Networking.Namespace") {
		t.Errorf("a hosted container naming a namespace the guest lacks: %v", err)
	}

	// A hosted container's network is the VM's: HCS v1's Network request cannot add an
	// endpoint to it.
	if err := e.Modify(ctx, wire.SystemRef{ID: "web"}, fmt.Sprintf(`{"ResourceType":"Network","RequestType":"Add","Settings":%q}`, otherEP)); err == nil ||
		!strings.Contains(err.Error(), "NetworkAdapters") {
		t.Errorf("a v1 Network request on a hosted container: %v, want it refused", err)
	}

	// The guest's namespace cannot go while NICs remain.
	if err := modify(e, "pod@vm", schema2.ModifySettingRequest{GuestRequest: schema2.GuestModifySettingRequest{
		ResourceType: schema2.ResourceTypeNetworkNamespace, RequestType: schema2.RequestTypeRemove, Settings: nsDoc}}); err == nil {
		t.Error("NetworkNamespace Remove with a NIC in it succeeded")
	}

	// The VM stops: its NIC goes back to the HNS namespace, with its address, and its network
	// namespace is removed; the endpoint is still an HNS object.
	if err := e.Terminate(ctx, wire.SystemRef{ID: "pod@vm"}, ""); err != nil {
		t.Fatal(err)
	}
	vmSub.exited(t, "pod@vm")
	<-server
	if _, err := os.Stat(vmNetns); !os.IsNotExist(err) {
		t.Errorf("the VM's network namespace file after stop: %v", err)
	}
	// (eth1: the other endpoint took eth0 meanwhile.)
	got := links(t, nsPath)
	if strings.Join(got["eth1 "+mac], ",") != "10.252.0.7/24" {
		t.Errorf("the endpoint's namespace after the VM stopped: %v, want eth1 %s 10.252.0.7/24 back", got, mac)
	}
	if _, err := h.QueryEndpoint(ctx, epID, ""); err != nil {
		t.Errorf("the endpoint after the VM stopped: %v", err)
	}
	// Plugged again into a new VM, it can be: nothing of the old VM holds it. A crash of that
	// VM gives it back too.
	againSub, _ := startVM(t, e, "again@vm", "10.0.20348.1", 64)
	if err := modify(e, "again@vm", nicRequest(schema2.RequestTypeAdd, "nic0", epID, nil)); err != nil {
		t.Fatalf("the endpoint as a NIC of a second VM after the first stopped: %v", err)
	}
	if got := links(t, nsPath); len(got) != 1 {
		t.Errorf("the endpoint's namespace while it is the second VM's NIC: %v, want only the other endpoint", got)
	}
	if err := e.Crash(ctx, "again@vm"); err != nil {
		t.Fatal(err)
	}
	if st := againSub.exited(t, "again@vm"); st.ExitType != schema2.NotificationUnexpectedExit {
		t.Errorf("crash: exit %+v", st)
	}
	if got := links(t, nsPath); strings.Join(got["eth1 "+mac], ",") != "10.252.0.7/24" {
		t.Errorf("the endpoint's namespace after the VM crashed: %v, want eth1 %s 10.252.0.7/24 back", got, mac)
	}
}
