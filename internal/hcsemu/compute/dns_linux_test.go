package compute

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
)

// TestDaemonResolvConf: a process-isolated container in an HNS namespace finds its endpoint's DNS
// settings in C:\etc\resolv.conf when it starts (read from inside, by the workload), and the
// test images' ipconfig stand-in shows them in Windows' format; a container document's
// DnsSearchList (the spec's windows.network.DNSSearchList) is its search list; an endpoint
// hot-added with HCS v1's Network request rewrites the file of the running container.
func TestDaemonResolvConf(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("dns-daemon", "10.253.7.0/24", "10.253.7.1"))
	if err != nil {
		t.Fatal(err)
	}
	epID, err := h.CreateEndpoint(ctx, netID, "", `{"MacAddress":"00-15-5D-FD-07-05","Dns":{"Search":["google.com"],"ServerList":["10.10.10.10","10.10.10.11"],"Options":["ndots:8"]}}`)
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
	run := func(t *testing.T, cs computecore.System, cmdline string) string {
		t.Helper()
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: cmdline, CreateStdOutPipe: true})
		out := readAll(t, s.stdout)
		if code := s.exitCode(t); code != 0 {
			t.Fatalf("%s: exit code %d, output %q", cmdline, code, out)
		}
		return out
	}

	cs, vol := createSystem(t, api, "dns-pod", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, nsID), true)
	// The container's first process holds it up (its end would stop the container).
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 600`})
	want := "# hcsemu-adapter 00-15-5D-FD-07-05 suffix=google.com servers=10.10.10.10,10.10.10.11\n" +
		"nameserver 10.10.10.10\nnameserver 10.10.10.11\nsearch google.com\noptions ndots:1\n"
	if got := run(t, cs, `C:\workload\workload.exe read C:\etc\resolv.conf`); !strings.HasSuffix(got, want) {
		t.Errorf("C:\\etc\\resolv.conf in the container:\n%s\nwant it to end in\n%s", got, want)
	}
	b, err := os.ReadFile(filepath.Join(vol, "workload", "workload.exe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "Windows", "System32", "IPCONFIG.EXE"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	out := run(t, cs, "ipconfig /all")
	for _, l := range []string{
		"   DNS Suffix Search List. . . . . . : google.com\r\n",
		"   Connection-specific DNS Suffix  . : google.com\r\n",
		"   DNS Servers . . . . . . . . . . . : 10.10.10.10\r\n" +
			"                                       10.10.10.11\r\n",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("ipconfig /all has no %q:\n%s", l, out)
		}
	}

	// The document's own search list.
	cs2, _ := createSystem(t, api, "dns-search-list", fmt.Sprintf(`,"Networking":{"Namespace":%q,"DnsSearchList":"a.example,b.example"}`, nsID), true)
	if got := run(t, cs2, `C:\workload\workload.exe read C:\etc\resolv.conf`); !strings.Contains(got, "\nsearch a.example b.example\n") {
		t.Errorf("resolv.conf with DnsSearchList a.example,b.example:\n%s", got)
	}

	// A second endpoint hot-added (HCS v1, hcsshim's HotAttachEndpoint) to the running pod.
	ep2, err := h.CreateEndpoint(ctx, netID, "", `{"MacAddress":"00-15-5D-FD-07-06","Dns":{"Domain":"corp.example","ServerList":["10.0.0.53"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, api, "hot-add", func(op computecore.Operation) error {
		return api.ModifyComputeSystem(cs, op, fmt.Sprintf(`{"ResourceType":"Network","RequestType":"Add","Settings":%q}`, ep2), 0)
	})
	got := run(t, cs, `C:\workload\workload.exe read C:\etc\resolv.conf`)
	if !strings.Contains(got, "# hcsemu-adapter 00-15-5D-FD-07-06 suffix=corp.example servers=10.0.0.53\n") || !strings.Contains(got, "nameserver 10.0.0.53\n") {
		t.Errorf("resolv.conf after a second endpoint joined:\n%s", got)
	}

	// A container in no network gets no file.
	cs3, vol3 := createSystem(t, api, "dns-none", "", true)
	_ = cs3
	if _, err := os.Stat(filepath.Join(vol3, "etc", "resolv.conf")); err == nil {
		t.Error("a container without a network has a resolv.conf")
	}
}

// TestVolumeWriteFile: the resolver file goes into the folder its parent names without regard to
// case, made if missing, replacing a file there (in any case), and never outside the volume.
func TestVolumeWriteFile(t *testing.T) {
	dir := t.TempDir()
	v, err := openVolume(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.writeFile(resolvConfRel, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "etc", "resolv.conf")); err != nil || string(b) != "one" {
		t.Fatalf("a new etc/resolv.conf: %q, %v", b, err)
	}
	os.RemoveAll(filepath.Join(dir, "etc"))
	os.MkdirAll(filepath.Join(dir, "Etc"), 0o755)
	os.WriteFile(filepath.Join(dir, "Etc", "RESOLV.CONF"), []byte("old"), 0o644)
	if err := v.writeFile(resolvConfRel, []byte("two")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "Etc"))
	if b, err := os.ReadFile(filepath.Join(dir, "Etc", "RESOLV.CONF")); err != nil || string(b) != "two" || len(entries) != 1 {
		t.Fatalf("Etc/RESOLV.CONF replaced: %q, %v, entries %v", b, err, entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "etc")); err == nil {
		t.Error("a second folder etc beside Etc")
	}
	// A link in the volume that points outside it is not followed out.
	outside := t.TempDir()
	os.RemoveAll(filepath.Join(dir, "Etc"))
	os.Symlink(outside, filepath.Join(dir, "etc"))
	v.writeFile(resolvConfRel, []byte("three"))
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the volume: %v", entries)
	}
}

// TestDaemonResolverOneSuffix: name resolution in a container follows Windows' rules for a pod
// (Kubernetes docs, "Networking on Windows", DNS limitations: one suffix, the pod namespace's;
// kubernetes.default.svc.cluster.local and kubernetes resolve, kubernetes.default does not),
// with kubelet's usual three search suffixes on the endpoint and a DNS server on the emulated
// host that knows kubernetes.default.svc.cluster.local only. The workload's resolver is Go's,
// which reads the container's C:\etc\resolv.conf as a Linux resolver would.
func TestDaemonResolverOneSuffix(t *testing.T) {
	d := startDaemon(t)
	api := dial(t, d)
	h := d.engine.hns
	ctx := context.Background()
	netID, err := h.CreateNetwork(ctx, "", networkDoc("dns-resolve", "10.253.8.0/24", "10.253.8.1"))
	if err != nil {
		t.Fatal(err)
	}
	// The DNS server listens on the emulated host's address on the network (its gateway).
	var conn net.PacketConn
	if err := hns.InNetns(hns.HostNetnsPath(d.engine.cfg.Root), func() (err error) {
		conn, err = net.ListenPacket("udp4", "10.253.8.1:53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go serveDNS(conn, map[string]net.IP{"kubernetes.default.svc.cluster.local.": net.IPv4(10, 96, 0, 1)})

	epID, err := h.CreateEndpoint(ctx, netID, "", `{"Dns":{"Search":["default.svc.cluster.local","svc.cluster.local","cluster.local"],"ServerList":["10.253.8.1"]}}`)
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
	cs, _ := createSystem(t, api, "dns-resolve", fmt.Sprintf(`,"Networking":{"Namespace":%q}`, nsID), true)
	mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe sleep 600`})
	for _, c := range []struct {
		name string
		want string // "" for not found
	}{
		{"kubernetes.default.svc.cluster.local", "10.96.0.1\n"},
		{"kubernetes", "10.96.0.1\n"},
		{"kubernetes.default", ""},
		{"kubernetes.default.svc", ""},
	} {
		s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: `C:\workload\workload.exe resolve ` + c.name, CreateStdOutPipe: true})
		out := readAll(t, s.stdout)
		code := s.exitCode(t)
		if c.want != "" && (code != 0 || out != c.want) || c.want == "" && code == 0 {
			t.Errorf("resolve %s in the pod: exit code %d, output %q; want %q", c.name, code, out, c.want)
		}
	}
}

// serveDNS answers the DNS queries that reach conn: an A record for a name of records (fully
// qualified, lower case), no records for its other types, NXDOMAIN for any other name. It ends
// when conn is closed.
func serveDNS(conn net.PacketConn, records map[string]net.IP) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		if len(q) < 12 {
			continue
		}
		// The question: labels up to a zero byte, then QTYPE and QCLASS.
		var labels []string
		i := 12
		for i < len(q) && q[i] != 0 && i+1+int(q[i]) <= len(q) {
			labels = append(labels, string(q[i+1:i+1+int(q[i])]))
			i += 1 + int(q[i])
		}
		if i+5 > len(q) {
			continue
		}
		qtype := int(q[i+1])<<8 | int(q[i+2])
		question := q[12 : i+5]
		name := strings.ToLower(strings.Join(labels, ".")) + "."
		ip, known := records[name]
		resp := []byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}
		if !known {
			resp[3] |= 3 // NXDOMAIN
		}
		resp = append(resp, question...)
		if known && qtype == 1 {
			resp[7] = 1
			// The question's name (a pointer to offset 12), A, IN, TTL 60, 4 bytes.
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, ip.To4()...)
		}
		conn.WriteTo(resp, from)
	}
}
