//go:build windows

package cri

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// TestPortForward forwards a local port to a port a pod's container listens on, as `kubectl
// port-forward` does, through the URL of CRI's PortForward on containerd's streaming server, in
// a process-isolated pod and in a Hyper-V pod. containerd 2.x on Windows dials the pod's IP
// itself (internal/cri/server/sandbox_portforward_windows.go); 1.7 instead runs
// `wincat.exe 127.0.0.1 PORT` in the pod's sandbox container (pkg/cri/server/
// sandbox_portforward_windows.go), where the node's pause image has a stand-in for it
// (test/wincat): in a Hyper-V pod that exec runs in the pod's utility VM (issue 27). Several
// connections go through one after the other, each a stream of its own over the one
// port-forward connection, and then 1 MiB each way (more than a pipe's buffer, 64 KiB on Linux
// and in Wine's named pipes) arrives intact.
func TestPortForward(t *testing.T) {
	for _, c := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}} {
		t.Run(c.name, func(t *testing.T) {
			n := connect(t)
			pod, podCfg := runPodWith(t, n, "pod-port-forward-"+c.name, c.handler)
			server := containerConfig("server", "listen", "0.0.0.0:8080")
			startContainer(t, n, pod, podCfg, server)
			waitLog(t, filepath.Join(podCfg.LogDirectory, server.LogPath), " stdout F listening")
			addr := portForward(t, n, pod, 8080)
			for i, msg := range []string{"through port-forward", "and again", "a third time"} {
				if got := echo(t, addr, msg); got != "echo: "+msg+"\n" {
					t.Fatalf("connection %d: answer through the forwarded port %q; want %q", i+1, got, "echo: "+msg+"\n")
				}
			}
			big := make([]byte, 1<<20)
			rnd := rand.New(rand.NewPCG(27, 1))
			for i := range big {
				big[i] = 'a' + byte(rnd.IntN(26)) // one line: no newline in it
			}
			got := echo(t, addr, string(big))
			if want := "echo: " + string(big) + "\n"; got != want {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Fatalf("1 MiB through the forwarded port: got %d bytes, want %d; they differ from byte %d", len(got), len(want), i)
			}
			// Whatever ran for the exec (on 1.7, in a Hyper-V pod: the sandbox's container in
			// the VM, compute system <pod id>) goes with the pod.
			if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
				t.Fatalf("StopPodSandbox: %v", err)
			}
			if _, err := removePodSandbox(ctx(t), n.rt, pod); err != nil {
				t.Fatalf("RemovePodSandbox: %v", err)
			}
			if systems := computeSystems(t); containsPrefix(systems, pod) {
				t.Fatalf("compute systems after the pod's removal: %v", systems)
			}
		})
	}
}

// portForward forwards a free local port to port in pod, as kubectl port-forward does, until
// the test ends, and returns the local address.
func portForward(t *testing.T, n *node, pod string, port int32) string {
	t.Helper()
	resp, err := n.rt.PortForward(ctx(t), &runtimeapi.PortForwardRequest{PodSandboxId: pod, Port: []int32{port}})
	if err != nil {
		t.Fatalf("PortForward: %v", err)
	}
	u, err := url.Parse(resp.GetUrl())
	if err != nil {
		t.Fatalf("PortForward URL %q: %v", resp.GetUrl(), err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	// Local port 0: any free one (GetPorts says which). What client-go reports of the
	// forwarded connections ("lost connection to pod", …) goes to the test's log at its end.
	var errs lockedBuffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, &errs)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
		if s := errs.String(); s != "" {
			t.Logf("port-forward's errors:\n%s", s)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended before it was ready: %v", err)
	case <-time.After(rpcTimeout):
		t.Fatalf("port-forward not ready after %s", rpcTimeout)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports %v, %v; want one", ports, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
}

// lockedBuffer is a bytes.Buffer that goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// echo sends one line to the workload's echo server at addr and returns its answer.
func echo(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Minute)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(rpcTimeout))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("answer from %s: %q, %v", addr, line, err)
	}
	return line
}

// TestHostPort runs a pod with a hostPort mapping, as kubelet sends a container's
// `ports[].hostPort`: containerd hands the mapping to CNI as the portMappings capability and
// win-bridge makes it an HNS PortMapping policy of the pod's endpoint. From the node's host, an
// HTTP GET to the pod's IP reaches it (as kubelet's HTTP probes). Another pod reaches the pod
// through the node's address at the host port. The node's own programs do not, neither at the
// node's address nor at 127.0.0.1: the node's network is an L2Bridge one, whose port mappings
// are VFP policies, and Windows routes the host's own connections to them to the vSwitch only
// when the policy carries the LocalRoutedVip flag (Azure/azure-container-networking#1863,
// microsoft/Windows-Containers#360), which win-bridge does not set. (On a NAT network WinNAT
// maps them, 127.0.0.1 included, from Windows Server 2019 on, as containerd's Windows CI checks
// with Microsoft's nat plugin; the node has no NAT network: that plugin cannot be built here.
// hcsemu's hostReachOf has the sources and its TestPortMappingsFromHost tests both types.)
func TestHostPort(t *testing.T) {
	n := connect(t)
	const hostPort, containerPort = 38080, 8080
	cfg := podConfig(t, "pod-host-port")
	cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: containerPort, HostPort: hostPort}}
	pod, err := n.rt.RunPodSandbox(ctx(t), cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox with a hostPort: %v", err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, pod)
		n.rt.RemovePodSandbox(c, pod)
	})
	const text = "hello through the hostPort"
	server := containerConfig("http", "http", fmt.Sprintf("0.0.0.0:%d", containerPort), text)
	startContainer(t, n, pod, cfg, server)
	waitLog(t, filepath.Join(cfg.LogDirectory, server.LogPath), " stdout F listening")

	// The pod itself at its IP, as kubelet's HTTP probes reach it.
	client := &http.Client{Timeout: time.Minute}
	u := fmt.Sprintf("http://%s/", net.JoinHostPort(podIP(t, n, pod), fmt.Sprint(containerPort)))
	resp, err := client.Get(u)
	if err != nil {
		t.Fatalf("GET %s (the pod's IP, the container port): %v", u, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != text {
		t.Fatalf("GET %s: %s %q, %v; want 200 %q", u, resp.Status, body, err, text)
	}

	hosts := hostAddrs(t)
	t.Logf("the node's addresses: %v", hosts)
	// Another pod reaches the mapping at the node's addresses: an empty line is a whole
	// request to the workload's HTTP server, whose first answer line is the status.
	other, otherCfg := runPod(t, n, "pod-host-port-client")
	tries := 0
	fromPod := func(addr string) (*runtimeapi.ContainerStatus, string) {
		t.Helper()
		tries++
		c := containerConfig(fmt.Sprintf("get-%d", tries), "connect", addr, "")
		st := waitExited(t, n, startContainer(t, n, other, otherCfg, c))
		b, _ := os.ReadFile(filepath.Join(otherCfg.LogDirectory, c.LogPath))
		return st, string(b)
	}
	for _, h := range hosts {
		addr := net.JoinHostPort(h, fmt.Sprint(hostPort))
		if st, log := fromPod(addr); st.GetExitCode() != 0 || !strings.Contains(log, "HTTP/1.1 200 OK") {
			t.Fatalf("another pod → %s (the node's address, the host port): exit code %d, log %q; want HTTP/1.1 200 OK", addr, st.GetExitCode(), log)
		}
	}
	// The node's own programs: nothing answers, at the node's addresses or at localhost
	// (nothing listens on the host port itself, so the connection is refused).
	for _, addr := range append(hosts, "127.0.0.1") {
		addr = net.JoinHostPort(addr, fmt.Sprint(hostPort))
		if c, err := net.DialTimeout("tcp", addr, time.Minute); err == nil {
			c.Close()
			t.Fatalf("%s answered the node itself: on an L2Bridge network a Windows host reaches its own port mappings only with LocalRoutedVip, which win-bridge does not set", addr)
		}
	}

	// The mapping goes with the pod: the host port no longer answers another pod.
	if err := n.rt.StopPodSandbox(ctx(t), pod); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	for _, h := range hosts {
		addr := net.JoinHostPort(h, fmt.Sprint(hostPort))
		if st, log := fromPod(addr); st.GetExitCode() == 0 || strings.Contains(log, "HTTP/1.1") {
			t.Fatalf("another pod → %s after StopPodSandbox: exit code %d, log %q; want no answer", addr, st.GetExitCode(), log)
		}
	}
}

// hostAddrs are the node's own IPv4 addresses other than loopback, as Windows lists its
// adapters' addresses (GetAdaptersAddresses). Under the emulator they are the emulated host's:
// its networks' bridges carry the host's address on each network, and the node's Wine services
// run in the host's network namespace (test/winnode).
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("the node's addresses: %v", err)
	}
	var hosts []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			hosts = append(hosts, ipn.IP.String())
		}
	}
	if len(hosts) == 0 {
		t.Fatalf("the node has no IPv4 address but loopback: %v", addrs)
	}
	return hosts
}
