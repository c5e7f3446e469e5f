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

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hns/hcn"
)

// TestDaemonNetworking checks the HNS dataplane with real namespaces: a container naming an HNS
// namespace runs in it (it serves on its endpoint's address, reached from the emulated host),
// a container naming an unknown namespace is refused naming the field, and deleting the HNS
// objects removes their Linux state.
func TestDaemonNetworking(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()

	netID, err := h.CreateNetwork(ctx, "", networkDoc("daemon-net", "10.253.0.0/24", "10.253.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"IpConfigurations":[{"IpAddress":"10.253.0.5"}],"Policies":[{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":7000,"ExternalPort":17000}}]}`)
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
	root := d.engine.cfg.Root
	if _, err := os.Stat(filepath.Join(root, "netns", nsID)); err != nil {
		t.Fatalf("the namespace's netns file: %v", err)
	}

	t.Run("unknown namespace", func(t *testing.T) {
		vol := newVolume(t)
		op, _ := api.CreateOperation(0, nil)
		defer api.CloseOperation(op)
		cs, err := api.CreateComputeSystem("net-unknown", containerConfig(vol, `,"Networking":{"Namespace":"6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11"}`), op, 0)
		if err == nil {
			var doc string
			doc, err = api.WaitForOperationResult(op, opTimeout)
			err = fmt.Errorf("%w (%s)", err, doc)
			api.CloseComputeSystem(cs)
		}
		if err == nil || !strings.Contains(err.Error(), "Container.Networking.Namespace") || !strings.Contains(err.Error(), "6f1b3a55") {
			t.Fatalf("create with an unknown namespace: %v", err)
		}
		if s, err := d.engine.lookup(wire.SystemRef{ID: "net-unknown"}); err == nil {
			s.mu.Unlock()
			t.Error("the refused system exists")
		}
	})

	cs, _ := createSystem(t, api, "net-server", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, nsID), true)
	p := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe listen 0.0.0.0:7000`, CreateStdOutPipe: true})
	line, err := bufio.NewReader(p.stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("server: %q, %v", line, err)
	}
	hostPath := hns.HostNetnsPath(root)
	dialFromHost := func(addr string) (string, error) {
		var answer string
		err := hns.InNetns(hostPath, func() error {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "ping\n")
			answer, err = bufio.NewReader(c).ReadString('\n')
			return err
		})
		return answer, err
	}
	if got, err := dialFromHost("10.253.0.5:7000"); err != nil || got != "echo: ping\n" {
		t.Errorf("host → endpoint: %q, %v", got, err)
	}
	if got, err := dialFromHost("10.253.0.1:17000"); err != nil || got != "echo: ping\n" {
		t.Errorf("host port 17000 → endpoint: %q, %v", got, err)
	}
	// The endpoint's counters (GET /endpointstats, containerd's pod network stats) saw that
	// traffic, in both directions, from the endpoint's side: it received the pings (and the
	// TCP handshakes), it sent the echoes.
	var stats struct {
		Success bool
		Output  hcn.EndpointStats
	}
	if err := json.Unmarshal([]byte(h.HNSCall(ctx, "GET", "/endpointstats/"+epID, "")), &stats); err != nil {
		t.Fatal(err)
	}
	if st := stats.Output; !stats.Success || st.EndpointID != epID || st.BytesReceived == 0 || st.BytesSent == 0 || st.PacketsReceived < 2 || st.PacketsSent < 2 {
		t.Errorf("endpoint stats after two exchanges: %+v", stats)
	}
	// The machine's own namespace has none of it (checked without sending anything: a
	// packet to the pod's address from here would leave the machine).
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if strings.HasPrefix(a.String(), "10.253.0.") {
				t.Errorf("the machine's own namespace has the address %s", a)
			}
		}
	}
	doc, _ := h.QueryNamespace(ctx, nsID, "")
	if !strings.Contains(doc, `"net-server"`) {
		t.Errorf("the namespace does not list its container: %s", doc)
	}
	mustRun(t, api, "terminate", func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	if doc, _ := h.QueryNamespace(ctx, nsID, ""); strings.Contains(doc, `"net-server"`) {
		t.Errorf("the stopped container is still in the namespace: %s", doc)
	}

	if err := h.DeleteNamespace(ctx, nsID); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteNetwork(ctx, netID); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "netns"))
	for _, e := range entries {
		if e.Name() != "host" {
			t.Errorf("left in %s: %s", filepath.Join(root, "netns"), e.Name())
		}
	}
	for l := range links(t, hostPath) {
		t.Errorf("link left in the emulated host: %s", l)
	}
}

// TestNetnsCleanedOnRestart checks that a daemon starting on a root a dead one left removes the
// network namespaces that one left mounted.
func TestNetnsCleanedOnRestart(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	dir := filepath.Join(root, "netns")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "6f1b3a55-0e2b-4b8e-9c1e-0d6a1a3b7c11")
	if err := hns.NewNetnsFile(stale); err != nil {
		t.Fatal(err)
	}
	if err := hns.NewNetnsFile(filepath.Join(dir, "host")); err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(context.Background(), Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale namespace is still there")
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s is still there after Close", dir)
	}
	for _, m := range mountsIn(root) {
		t.Errorf("still mounted: %s", m)
	}
}

func mountsIn(root string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], root) {
			out = append(out, f[4])
		}
	}
	return out
}
