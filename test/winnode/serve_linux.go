//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hns"
	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

const (
	// Pipe is containerd's default pipe on Windows. The node's wineserver is its own (a private
	// prefix), so the name is private to the node.
	Pipe      = `\\.\pipe\containerd-containerd`
	wcowPipe  = `\\.\pipe\containerd-wcow-snapshotter`
	wine64    = "/usr/lib/wine/wine64"
	wineSrv   = "/usr/lib/wine/wineserver"
	network   = "winnode"
	hostBuild = "10.0.20348.1"
)

// node is what serve runs.
type node struct {
	nodeFlags
	env   []string   // the Wine environment of every Windows process of the node
	tcp   string     // hcsemu's TCP address, the same in both namespaces
	mu    sync.Mutex // guards procs: stop may run while up still starts parts
	procs []*exec.Cmd
	lns   []net.Listener
	steps *os.File
}

func serveCmd(args []string) error {
	var n node
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	n.register(fs)
	fs.Parse(args)
	if err := n.validate(); err != nil {
		return err
	}
	// Every process serve starts inherits the marker by which down finds the node's processes.
	if err := os.Setenv(nodeMarker, n.root); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(filepath.Join(n.root, "serve.pid"), []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		return err
	}
	var err error
	if n.steps, err = os.Create(filepath.Join(n.root, "steps")); err != nil {
		return err
	}
	defer n.steps.Close()
	// up runs beside the signal wait: a SIGTERM while a step hangs stops the node too (the
	// step's processes die with it).
	upErr := make(chan error, 1)
	go func() { upErr <- n.up(ctx) }()
	select {
	case err = <-upErr:
		if err == nil {
			<-ctx.Done()
		}
	case <-ctx.Done():
	}
	n.stop()
	return err
}

// step runs one step of bringing the node up and records how long it took.
func (n *node) step(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	status := "ok"
	if err != nil {
		status = "FAILED: " + err.Error()
	}
	fmt.Fprintf(n.steps, "%-34s %7.2fs %s\n", name, time.Since(start).Seconds(), status)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// win is a Linux path as Wine's Z: drive shows it.
func win(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

func (n *node) path(elem ...string) string {
	return filepath.Join(append([]string{n.root}, elem...)...)
}

// wineCompatLog is where the node's Windows processes report what hack/wine's compat DLL did for
// them (a process start done again, winespawn.c), as Wine sees the file: never their own stderr,
// which can be a process's answer (the shim's start action's is containerd's bootstrap answer).
func (n *node) wineCompatLog() string { return win(n.path("logs", "winecompat.log")) }

func (n *node) up(ctx context.Context) error {
	start := time.Now()
	prefix := n.path("wine", "prefix")
	wineDebug := wineDebugChannels()
	n.env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEARCH=win64", "WINEDEBUG="+wineDebug, "DISPLAY=",
		"WINEDLLOVERRIDES=mscoree=;mshtml=", "HCSEMU_TCP_KEY_FILE="+n.path("hcsemu.key"),
		"RUNHCS_WINECOMPAT_LOG="+n.wineCompatLog())
	if err := n.step("hcsemu (HCS, HNS, storage)", n.startHCSEmu); err != nil {
		return err
	}
	n.env = append(n.env, "HCSEMU_TCP_ADDRESS="+n.tcp)
	if err := n.step("hcsemu relay into the host netns", n.relayHCSEmu); err != nil {
		return err
	}
	if err := n.step("private Wine prefix", func() error { return n.makePrefix(prefix) }); err != nil {
		return err
	}
	var registryAddr string
	if err := n.step("registry with the test images", func() (err error) { registryAddr, err = n.startRegistry(ctx); return err }); err != nil {
		return err
	}
	if err := n.step("HNS network and CNI config", func() error { return n.network(ctx) }); err != nil {
		return err
	}
	var version string
	if err := n.step("containerd.exe", func() (err error) { version, err = n.startContainerd(ctx, registryAddr); return err }); err != nil {
		return err
	}
	fmt.Fprintf(n.steps, "%-34s %7.2fs (containerd %s, snapshotter %s)\n", "node up", time.Since(start).Seconds(), version, n.snapshotter)
	fmt.Fprintf(n.steps, "%-34s %s\n", "sandboxer (runhcs-wcow-process)", n.sandboxer)
	return rootdir.WriteEnv(envFile(n.root), [][2]string{
		{"WINEPREFIX", prefix}, {"WINE64", wine64}, {"WINEARCH", "win64"}, {"WINEDEBUG", wineDebug},
		{"WINEDLLOVERRIDES", "mscoree=;mshtml="}, {"HCSEMU_TCP_ADDRESS", n.tcp}, {"HCSEMU_TCP_KEY_FILE", n.path("hcsemu.key")},
		{"RUNHCS_WINECOMPAT_LOG", n.wineCompatLog()}, {"RUNHCS_NODE_PIPE", Pipe}, {"RUNHCS_NODE_REGISTRY", registryAddr}, {"RUNHCS_NODE_ROOT", n.root},
		{"RUNHCS_NODE_CONTAINERD", version}, {"RUNHCS_NODE_SNAPSHOTTER", n.snapshotter},
		{"RUNHCS_NODE_SANDBOXER", n.sandboxer}, {"RUNHCS_NODE_POD_SUBNET", n.pods.Subnet.String()},
	})
}

// wineDebugChannels is the WINEDEBUG of the node's Windows processes: none by default (Wine's
// fixme and err lines would fill containerd's log), or RUNHCS_WINNODE_WINEDEBUG when set, to see
// why Wine failed a call (e.g. "err+all,+process" for a CreateProcess failure); each process
// writes them to its own stderr, containerd.exe's to logs/containerd.log.
func wineDebugChannels() string {
	if v := os.Getenv("RUNHCS_WINNODE_WINEDEBUG"); v != "" {
		return v
	}
	return "-all"
}

// makePrefix copies the prepared prefix and gives it the registry of a Windows Server 2022 node
// (nodeRegistry). Wine 8 reads the version it reports from these values when no Wine "Version"
// is set (observed: `cmd /c ver` then prints 10.0.20348): containerd's CRI matches image
// platforms against the build the host reports (containerd/platforms' Windows matcher), and
// Debian's Wine reports Windows 7 by default.
func (n *node) makePrefix(prefix string) error {
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", n.prefix, prefix).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %w: %s", n.prefix, err, out)
	}
	reg, err := nodeRegistry(hostBuild, uuid.NewString(), uint32(time.Now().Unix()))
	if err != nil {
		return err
	}
	reg += machineEnvironment([][2]string{{"HCSEMU_TCP_ADDRESS", n.tcp}, {"HCSEMU_TCP_KEY_FILE", n.path("hcsemu.key")},
		{"RUNHCS_WINECOMPAT_LOG", n.wineCompatLog()}})
	regFile := n.path("wine", "version.reg")
	if err := os.WriteFile(regFile, []byte(reg), 0o644); err != nil {
		return err
	}
	// The prefix's own wineserver, kept running (-p) until stop kills it.
	// It goes to the background itself: no pipe of ours may be its output, or waiting for the
	// command would wait for the server. It runs in the emulated host's network namespace: Wine
	// (since 6) makes a Windows program's sockets in the wineserver, so that is where the node's
	// Windows processes reach the network (the registry, pods, hcsemu through the relay).
	srv := exec.Command(filepath.Join(n.bin, "hcsemu"), "hostns", "--root", emuRoot(n.root), "--", wineSrv, "-p")
	srv.Env = n.env
	if err := srv.Run(); err != nil {
		return fmt.Errorf("wineserver -p: %w", err)
	}
	// The prefix's first program starts its services (services.exe, winedevice.exe), which
	// outlive it: in the host namespace too, or nsiproxy (GetAdaptersAddresses, the routing
	// table) would list the machine's interfaces instead of the emulated host's.
	return n.runLogged("regedit", n.wine("regedit", "/S", win(regFile)))
}

// runLogged runs a command to its end with its output in logs/NAME.log. Never a pipe for a Wine
// program: the services Wine starts for it (winedevice.exe) inherit it and outlive it, and a
// wait for the pipe's end would wait for them.
func (n *node) runLogged(name string, cmd *exec.Cmd) error {
	f, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (see %s)", name, err, f.Name())
	}
	return nil
}

// start starts a part of the node with its output in logs/NAME.log.
func (n *node) start(name string, cmd *exec.Cmd) error {
	f, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	n.mu.Lock()
	n.procs = append(n.procs, cmd)
	n.mu.Unlock()
	return nil
}

// waitFor polls cond until it holds, the process exits or the timeout passes.
func waitFor(what string, cmd *exec.Cmd, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if cmd != nil && cmd.ProcessState == nil {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WNOHANG, nil); pid == cmd.Process.Pid {
				return fmt.Errorf("%s: the process exited (%v)", what, ws)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func (n *node) startHCSEmu() error {
	tcpFile := n.path("hcsemu.tcp")
	cmd := exec.Command(filepath.Join(n.bin, "hcsemu"), "--address", n.path("hcsemu.sock"), "--root", emuRoot(n.root),
		"--os-version", hostBuild, "--tcp-address", "127.0.0.1:0", "--tcp-address-file", tcpFile, "--tcp-key-file", n.path("hcsemu.key"))
	if err := n.start("hcsemu", cmd); err != nil {
		return err
	}
	if err := waitFor("hcsemu", cmd, time.Minute, func() bool {
		b, err := os.ReadFile(tcpFile)
		n.tcp = strings.TrimSpace(string(b))
		return err == nil && n.tcp != ""
	}); err != nil {
		return err
	}
	return nil
}

// listenInHost listens on addr in the emulated host's network namespace.
func (n *node) listenInHost(addr string) (net.Listener, error) {
	var l net.Listener
	err := hcsemu.InHostNetns(emuRoot(n.root), func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	n.lns = append(n.lns, l)
	return l, nil
}

// relayHCSEmu makes hcsemu's TCP address answer in the host namespace too, where the node's
// Windows processes run: their stand-in DLLs dial HCSEMU_TCP_ADDRESS (loopback). The bytes are
// copied as they are; the key check stays hcsemu's.
func (n *node) relayHCSEmu() error {
	l, err := n.listenInHost(n.tcp)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", n.tcp)
				if err != nil {
					return
				}
				defer up.Close()
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					io.Copy(up, c)
					up.(*net.TCPConn).CloseWrite()
				}()
				io.Copy(c, up)
				c.(*net.TCPConn).CloseWrite()
				wg.Wait()
			}()
		}
	}()
	return nil
}

// network makes the node's HNS network (an L2Bridge, as win-bridge wants it) and the CNI
// configuration containerd's CRI reads: win-bridge in its ApiVersion 2 mode (HCN namespaces,
// containerd's order of calls; docs/emulator.md, "HNS"), with the portMappings and dns
// capabilities.
func (n *node) network(ctx context.Context) error {
	api, err := client.DialHNS(n.path("hcsemu.sock"))
	if err != nil {
		return err
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := hns.NewClient(api).CreateNetwork(ctx, &hcn.HostComputeNetwork{
		Name: network, Type: hcn.L2Bridge,
		Ipams: []hcn.Ipam{{Type: "Static", Subnets: []hcn.Subnet{{
			IpAddressPrefix: n.pods.Subnet.String(),
			Routes:          []hcn.Route{{NextHop: n.pods.Gateway.String(), DestinationPrefix: "0.0.0.0/0"}},
		}}}},
	}); err != nil {
		return err
	}
	binDir, confDir := n.path("cni", "bin"), n.path("cni", "conf")
	for _, d := range []string{binDir, confDir, n.path("cni", "ipam")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, exe := range []string{"win-bridge.exe", "host-local.exe"} {
		if err := os.Link(filepath.Join(n.bin, exe), filepath.Join(binDir, exe)); err != nil {
			return err
		}
	}
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0", "name": network, "type": "win-bridge", "apiVersion": 2,
		// win-bridge gives every endpoint an OutBoundNAT policy whose exception is this CIDR
		// (containernetworking/plugins v1.9.1 pkg/hns ApplyOutboundNatPolicy), as Windows
		// clusters exempt the cluster's pod CIDR: traffic to pods of any node keeps the pod's
		// address, and only what leaves the cluster is NATed.
		"ipMasqNetwork": n.pods.ClusterCIDR.String(),
		// portMappings: hostPort; dns: a pod's dns_config (servers, searches), which
		// containerd's CRI passes as runtimeConfig.dns and win-bridge writes into the HNS
		// endpoint's Dns (containernetworking/plugins pkg/hns RuntimeConfig, GetDNS).
		"capabilities": map[string]any{"portMappings": true, "dns": true},
		"ipam": map[string]any{
			"type": "host-local", "dataDir": win(n.path("cni", "ipam")),
			"ranges": []any{[]any{map[string]any{"subnet": n.pods.Subnet.String(), "rangeStart": n.pods.RangeStart.String(), "rangeEnd": n.pods.RangeEnd.String()}}},
		},
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-winnode.conf"), conf, 0o644)
}

// wine runs a Windows program of the node in the host namespace (hcsemu hostns), in C:\ (the
// prefix's drive_c) as Windows runs a service on C:: a rooted path without a drive, which CRI
// clients send (kubelet's pod log folder, /var/log/pods/…), is then on C:, not on Wine's Z:
// (the Linux root), which a Linux working folder would make the current drive.
func (n *node) wine(args ...string) *exec.Cmd {
	argv := append([]string{"hostns", "--root", emuRoot(n.root), "--", wine64}, args...)
	cmd := exec.Command(filepath.Join(n.bin, "hcsemu"), argv...)
	cmd.Env = n.env
	cmd.Dir = n.path("wine", "prefix", "drive_c")
	return cmd
}

// startContainerd starts containerd.exe (and the snapshotter) and answers the version that
// serves, which must be the one --containerd asked for.
func (n *node) startContainerd(ctx context.Context, registry string) (string, error) {
	hosts := n.path("certs.d", "_default")
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return "", err
	}
	// Every registry name resolves and pulls from the node's registry (containerd's hosts
	// directory; _default applies to any host without a folder of its own).
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(fmt.Sprintf(
		"[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", registry)), 0o644); err != nil {
		return "", err
	}
	cfg := ContainerdConfig(ConfigOptions{
		Containerd: n.containerd, Root: win(n.path("containerd", "root")), State: win(n.path("containerd", "state")),
		Snapshotter: n.snapshotter, CNIBin: win(n.path("cni", "bin")), CNIConf: win(n.path("cni", "conf")),
		Hosts: win(n.path("certs.d")), Sandboxer: n.sandboxer, SnapshotterRoot: win(n.path("wcow")),
	})
	cfgPath := n.path("containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	if n.snapshotter == "wcow" {
		snap := n.wine(filepath.Join(n.bin, "containerd-wcow-snapshotter.exe"), "--address", wcowPipe,
			"--root", win(n.path("wcow")), "--containerd-address", Pipe)
		if err := n.start("snapshotter", snap); err != nil {
			return "", err
		}
	}
	cmd := n.wine(filepath.Join(n.bin, "containerd.exe"), "--config", win(cfgPath), "--log-level", "debug")
	if err := n.start("containerd", cmd); err != nil {
		return "", err
	}
	ctr := filepath.Join(n.bin, "ctr.exe")
	if err := waitFor("containerd.exe", cmd, 2*time.Minute, func() bool {
		return n.runLogged("ctr-version", n.wine(ctr, "--address", Pipe, "--timeout", "10s", "version")) == nil
	}); err != nil {
		return "", err
	}
	out, err := os.ReadFile(n.path("logs", "ctr-version.log"))
	if err != nil {
		return "", err
	}
	version, err := serverVersion(string(out))
	if err != nil {
		return "", err
	}
	if !versionMatches(version, n.containerd) {
		return "", fmt.Errorf("containerd.exe in %s serves %s, not the --containerd %s asked for", n.bin, version, n.containerd)
	}
	return version, nil
}

// serverVersion is the server's version in `ctr version`'s output ("Server:", then
// "  Version:  v1.7.35").
func serverVersion(out string) (string, error) {
	_, server, ok := strings.Cut(strings.ReplaceAll(out, "\r\n", "\n"), "Server:\n")
	if ok {
		for _, line := range strings.Split(server, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:"); ok {
				return strings.TrimSpace(v), nil
			}
		}
	}
	return "", fmt.Errorf("ctr version: no server version in %q", out)
}

// versionMatches tells whether version (v2.4.2) is of the --containerd line (2, 1.7).
func versionMatches(version, line string) bool {
	return strings.HasPrefix(version, "v"+line+".")
}

// stop stops the parts in reverse order: the Windows processes (the wineserver kills every
// process of the prefix), the listeners, then hcsemu (which removes its compute systems,
// mounts and namespaces on SIGTERM).
func (n *node) stop() {
	k := exec.Command(wineSrv, "-k")
	k.Env = n.env
	k.Run()
	n.mu.Lock()
	procs := append([]*exec.Cmd(nil), n.procs...)
	n.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	for _, l := range n.lns {
		l.Close()
	}
	if err := n.wineserverGone(); err != nil {
		fmt.Fprintln(os.Stderr, "winnode:", err)
	}
}

// wineserverGone waits until the prefix's wineserver has exited.
func (n *node) wineserverGone() error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if len(processesOf(n.root, os.Getpid())) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("processes of the node are still running after 30s")
}

// machineEnvironment is the registry file's part (regedit's format) that sets vars as system
// environment variables: values of HKLM\System\CurrentControlSet\Control\Session
// Manager\Environment, which every account's environment block holds (CreateEnvironmentBlock,
// "Environment Variables" in Microsoft's documentation). The node sets the stand-in DLLs'
// connection to hcsemu (HCSEMU_TCP_ADDRESS, HCSEMU_TCP_KEY_FILE) so: a process whose environment
// does not come from winnode's, as a HostProcess container's does not (the shim gives it its
// account's environment block and the spec's variables: internal/hostprocess), still reaches
// the emulated host's HNS and HCS through them, as any process of a Windows host reaches its
// services. Without them kube-proxy.exe in a HostProcess pod failed at start ("Windows kernel
// is not compatible for Kernel mode": its first HNS call found no hcsemu).
func machineEnvironment(vars [][2]string) string {
	var b strings.Builder
	b.WriteString("[HKEY_LOCAL_MACHINE\\System\\CurrentControlSet\\Control\\Session Manager\\Environment]\r\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "%q=%q\r\n", v[0], v[1])
	}
	b.WriteString("\r\n")
	return b.String()
}

// nodeRegistry is the registry file (regedit's format) that makes the node's prefix a Windows
// Server 2022 host of build (10.0.20348.UBR) with the machine id systemUUID and the boot
// bootID: the values Windows' own tools and kubelet.exe read (k8s.io/kubernetes v1.37.2
// pkg/kubelet/winstats: version.go's GetOSInfo reads CurrentBuildNumber, the major and minor
// version numbers, UBR and ProductName, and fails at start without any of them;
// perfcounter_nodestats_windows.go reads HKLM\SYSTEM\HardwareConfig LastConfig, the system
// UUID in braces, and PrefetchParameters' BootId, a DWORD). kubelet reports
// major.minor.build.UBR as the node's kernel version and ProductName as its OS image.
// Assumptions: Windows counts BootId up at every boot; each `up` is a new machine's boot, so
// its start time (seconds) serves as a value that differs from one up to the next.
func nodeRegistry(build, systemUUID string, bootID uint32) (string, error) {
	parts := strings.Split(build, ".")
	if len(parts) != 4 {
		return "", fmt.Errorf("host build %q: want major.minor.build.revision", build)
	}
	var nums [4]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return "", fmt.Errorf("host build %q: part %d %q: %w", build, i+1, p, err)
		}
		nums[i] = v
	}
	if _, err := uuid.Parse(systemUUID); err != nil {
		return "", fmt.Errorf("system UUID %q: %w", systemUUID, err)
	}
	dword := func(v uint64) string { return fmt.Sprintf("dword:%08x", v) }
	var b strings.Builder
	b.WriteString("Windows Registry Editor Version 5.00\r\n\r\n")
	key := func(name string, values ...[2]string) {
		fmt.Fprintf(&b, "[%s]\r\n", name)
		for _, v := range values {
			fmt.Fprintf(&b, "%q=%s\r\n", v[0], v[1])
		}
		b.WriteString("\r\n")
	}
	str := func(s string) string { return fmt.Sprintf("%q", s) }
	key(`HKEY_LOCAL_MACHINE\Software\Microsoft\Windows NT\CurrentVersion`,
		[2]string{"CurrentVersion", str(fmt.Sprintf("%d.%d", nums[0], nums[1]))},
		[2]string{"CurrentBuildNumber", str(parts[2])},
		[2]string{"CurrentBuild", str(parts[2])},
		[2]string{"CurrentMajorVersionNumber", dword(nums[0])},
		[2]string{"CurrentMinorVersionNumber", dword(nums[1])},
		[2]string{"UBR", dword(nums[3])},
		[2]string{"CSDVersion", str("")},
		[2]string{"ProductName", str("Windows Server 2022 Datacenter")},
		[2]string{"EditionID", str("ServerDatacenter")},
		[2]string{"InstallationType", str("Server")},
		[2]string{"DisplayVersion", str("21H2")},
	)
	key(`HKEY_LOCAL_MACHINE\System\CurrentControlSet\Control\ProductOptions`,
		[2]string{"ProductType", str("ServerNT")})
	key(`HKEY_LOCAL_MACHINE\System\HardwareConfig`,
		[2]string{"LastConfig", str("{" + strings.ToLower(systemUUID) + "}")})
	key(`HKEY_LOCAL_MACHINE\System\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters`,
		[2]string{"BootId", dword(uint64(bootID))})
	return b.String(), nil
}
