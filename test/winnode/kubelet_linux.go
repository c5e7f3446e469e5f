//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
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

// kubeletCmd starts kubelet.exe (the Windows build) as one of the node's services (agent) and
// returns once its healthz answers, with the flags a Windows kubelet runs with (kubeletArgs). Without --kubeconfig it runs standalone, its pods from the manifest folder
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
	if err := os.MkdirAll(kubeletManifests(o.root), 0o755); err != nil {
		return err
	}
	if err := removeStaleSockets(filepath.Join(env["WINEPREFIX"], "drive_c", "var", "lib", "kubelet", "device-plugins")); err != nil {
		return err
	}
	return kubeletAgent.run(o.root, env, args, o.exe, kubeletArgs(o, env), o.timeout)
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

// kubeletAgent is kubelet.exe as a node service: healthy once its healthz answers.
var kubeletAgent = agent{name: "kubelet", exe: "kubelet.exe", healthy: kubeletHealthy}

// kubeletHealthy asks kubelet's healthz in the emulated host's network namespace.
func kubeletHealthy(root string) bool {
	body, err := hostGet(root, fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthzPort))
	return err == nil && strings.TrimSpace(string(body)) == "ok"
}

// hostGet GETs url with connections made in the emulated host's network namespace, and fails
// unless the answer is 200 OK.
func hostGet(root, url string) ([]byte, error) {
	tr := hostTransport(root)
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
