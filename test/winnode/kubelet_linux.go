//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/hcsemu"
)

// The kubelet's ports in the emulated host's network namespace: each node has its own, so the
// defaults serve (kubelet's healthz default is 127.0.0.1:10248; 10255 is the read-only port's
// historical default, which KubeletConfiguration v1beta1 now leaves at 0).
const (
	kubeletHealthzPort  = 10248
	kubeletReadOnlyPort = 10255
)

// kubeletOptions are `winnode kubelet`'s flags.
type kubeletOptions struct {
	root, exe, kubeconfig, nodeName string
	timeout                         time.Duration
	extra                           []string // after --, appended last: kubelet takes the last of a repeated flag
}

// kubeletCmd starts kubelet.exe (the Windows build) as one of the node's processes and returns
// once its healthz answers: in the node's Wine prefix (so the node's `down`, which ends every
// process of the prefix, ends it too), in the emulated host's network namespace (where
// containerd.exe and the pods' networks are), with the flags a Windows kubelet runs with
// (kubeletArgs). Without --kubeconfig it runs standalone, its pods from the manifest folder
// DIR/kubelet/manifests. Its output goes to DIR/logs/kubelet.log.
func kubeletCmd(args []string) error {
	fs := flag.NewFlagSet("kubelet", flag.ExitOnError)
	var o kubeletOptions
	fs.StringVar(&o.root, "root", "", "the node's folder")
	fs.StringVar(&o.exe, "exe", "", "kubelet.exe, the Windows build of kubelet")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the kubeconfig of the API server to register with (a Linux path); none: standalone, static pods from DIR/kubelet/manifests")
	fs.StringVar(&o.nodeName, "node-name", "", "the node's name (--hostname-override); default: the root folder's name, as a DNS label")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for kubelet's healthz")
	fs.Parse(args)
	o.extra = fs.Args()
	if o.root == "" || !filepath.IsAbs(o.root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", o.root)
	}
	if o.exe == "" {
		return fmt.Errorf("--exe: kubelet.exe is required")
	}
	if st, err := os.Stat(o.exe); err != nil || st.IsDir() {
		return fmt.Errorf("--exe %q: not a file: %v", o.exe, err)
	}
	if o.kubeconfig != "" {
		if _, err := os.Stat(o.kubeconfig); err != nil {
			return fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
		}
	}
	if o.nodeName == "" {
		o.nodeName = dnsLabel(filepath.Base(o.root))
	} else if dnsLabel(o.nodeName) != o.nodeName {
		return fmt.Errorf("--node-name %q: not a lower-case DNS label (RFC 1123)", o.nodeName)
	}
	env, err := readEnv(o.root)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(kubeletPIDFile(o.root)); err == nil {
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && syscall.Kill(pid, 0) == nil && belongs(pid, o.root) {
			return fmt.Errorf("kubelet already runs in the node at %s (pid %d)", o.root, pid)
		}
	}
	for _, d := range []string{kubeletManifests(o.root), filepath.Join(o.root, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := removeStaleSockets(filepath.Join(env["WINEPREFIX"], "drive_c", "var", "lib", "kubelet", "device-plugins")); err != nil {
		return err
	}
	// `winnode restart kubelet` starts it again with exactly these flags.
	if err := atomicfile.WriteJSON(kubeletArgsFile(o.root), args, 0o644); err != nil {
		return err
	}
	argv := append([]string{"hostns", "--root", emuRoot(o.root), "--", env["WINE64"], o.exe}, kubeletArgs(o, env)...)
	hcsemuBin, err := os.ReadFile(filepath.Join(o.root, "hcsemu.path"))
	if err != nil {
		return fmt.Errorf("the node's hcsemu: %w", err)
	}
	cmd := exec.Command(string(hcsemuBin), argv...)
	// The node's mark (nodeMarker), as restart gives containerd.exe: kubelet.exe is a process of
	// the node, and down must find it also when serve crashed and the prefix's wineserver did not
	// end it (observed: a cluster's node whose serve and hcsemu were SIGKILLed kept its kubelet.exe
	// until the cluster's down swept it).
	cmd.Env = append(os.Environ(), nodeMarker+"="+filepath.Clean(o.root))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logPath := filepath.Join(o.root, "logs", "kubelet.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "winnode kubelet: %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logf, logf
	// Started in C:\ (the prefix's drive_c, which Wine shows as C:\), as Windows starts a service
	// in a folder of C:: kubelet's Windows defaults are rooted paths without a drive
	// (podLogsDir /var/log/pods, the plugin folders), which Windows resolves on the current
	// drive. From a Linux folder Wine's current drive would be Z:, the Linux root.
	cmd.Dir = filepath.Join(env["WINEPREFIX"], "drive_c")
	// Its own session: it outlives this command, as the node's other parts outlive `up`.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(kubeletPIDFile(o.root), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	deadline := time.After(o.timeout)
	for {
		if kubeletHealthy(o.root) {
			fmt.Fprintf(os.Stderr, "winnode: kubelet healthy in %.2fs (node %s, log %s)\n", time.Since(start).Seconds(), o.nodeName, logPath)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("kubelet.exe exited (%v) before its healthz answered; its log: %s", err, logPath)
		case <-deadline:
			return fmt.Errorf("kubelet's healthz did not answer within %s; its log: %s (it keeps running: winnode down --root %s)", o.timeout, logPath, o.root)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kubeletArgs are kubelet.exe's flags: those of a Windows node (Kubernetes' Windows
// documentation: no resolv.conf, no QoS cgroups, no node allocatable enforcement), the node's
// containerd pipe, a root folder inside the prefix, and either the kubeconfig or the static pod
// folder with the read-only port (standalone, where nothing else can authorise a client).
// kubelet asks containerd for its sandbox (pause) image: kubelet 1.37 has no
// --pod-infra-container-image, and the node's containerd names SandboxImage.
func kubeletArgs(o kubeletOptions, env map[string]string) []string {
	pipe := env["RUNHCS_NODE_PIPE"]
	if pipe == "" {
		pipe = Pipe
	}
	args := []string{
		"--container-runtime-endpoint=npipe://" + strings.ReplaceAll(pipe, `\`, "/"),
		"--hostname-override=" + o.nodeName,
		`--root-dir=C:\var\lib\kubelet`,
		`--cert-dir=C:\var\lib\kubelet\pki`,
		"--resolv-conf=",
		"--cgroups-per-qos=false",
		"--enforce-node-allocatable=",
		"--healthz-bind-address=127.0.0.1",
		fmt.Sprintf("--healthz-port=%d", kubeletHealthzPort),
		"--v=2",
	}
	if o.kubeconfig != "" {
		args = append(args, "--kubeconfig="+win(o.kubeconfig))
	} else {
		args = append(args, "--pod-manifest-path="+win(kubeletManifests(o.root)),
			fmt.Sprintf("--read-only-port=%d", kubeletReadOnlyPort))
	}
	return append(args, o.extra...)
}

func kubeletManifests(root string) string { return filepath.Join(root, "kubelet", "manifests") }
func kubeletPIDFile(root string) string   { return filepath.Join(root, "kubelet", "kubelet.pid") }
func kubeletArgsFile(root string) string  { return filepath.Join(root, "kubelet", "kubelet.args.json") }

// kubeletHealthy asks kubelet's healthz in the emulated host's network namespace.
func kubeletHealthy(root string) bool {
	body, err := kubeletGet(root, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthzPort))
	return err == nil && strings.TrimSpace(string(body)) == "ok"
}

// kubeletGet GETs url with connections made in the emulated host's network namespace.
func kubeletGet(root, url string) ([]byte, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := hcsemu.InHostNetns(emuRoot(root), func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, errors.New(url + ": " + resp.Status)
	}
	return b, nil
}

var notLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel makes s a lower-case RFC 1123 label, as a node name must be.
func dnsLabel(s string) string {
	s = strings.Trim(notLabel.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	if s == "" {
		s = "winnode"
	}
	return s
}

// wineSocketMagic begins the file hack/wine's winesock.c makes at an AF_UNIX socket's path
// (AFUNIX_MAGIC there).
const wineSocketMagic = "runhcs-wine-afunix "

// removeStaleSockets removes, from kubelet's device-plugin folder, the socket files a killed
// kubelet left, as kubelet.exe does itself at start on Windows and cannot under Wine.
//
// On Windows an AF_UNIX socket's file is a reparse point (IO_REPARSE_TAG_AF_UNIX) that Go's
// os.Stat reports as os.ModeSocket, and kubelet's device manager removes every such file of
// the folder before it listens on kubelet.sock again (k8s.io/kubernetes v1.37.2
// pkg/kubelet/cm/devicemanager/manager.go, CleanupPluginDirectory). Under Wine the file
// winesock.c makes is a plain file, so kubelet keeps it, and its bind fails with WSAEADDRINUSE
// (winapi error #10048: observed when kubelet.exe was killed and started again) and kubelet
// exits. Only files that winesock.c made are removed; anything else stays, as kubelet leaves it.
// Assumption: nothing else listens in that folder while kubelet is down (device plugins dial
// kubelet.sock; their own sockets live there too and are removed by kubelet on Windows too).
func removeStaleSockets(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b := make([]byte, len(wineSocketMagic))
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		n, _ := io.ReadFull(f, b)
		f.Close()
		if string(b[:n]) == wineSocketMagic {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("stale socket file of a killed kubelet: %w", err)
			}
		}
	}
	return nil
}
