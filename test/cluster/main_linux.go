//go:build linux

package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// The cluster's network (see doc.go). The Services range is Kubernetes' default.
const (
	physNet      = "10.251.0.0/24"
	apiAddr      = "10.251.0.1" // the control plane on phys0
	apiPort      = 6443
	serviceRange = "10.96.0.0/12"
	serviceIP    = "10.96.0.1" // the first address of serviceRange: the kubernetes Service
	bridgeName   = "phys0"
	// The cluster's pod CIDR: node K's pod subnet is 10.250.(K-1).0/24 (hack/cluster.sh gives
	// it to test/winnode as --pod-subnet), and every node's CNI configuration exempts the whole
	// CIDR from outbound NAT (winnode --cluster-cidr).
	podCIDR       = "10.250.0.0/16"
	clusterDomain = "cluster.local"
)

// nodeAddr is the address of the n-th Windows node (1, 2, …) on the physical network.
func nodeAddr(n int) (netip.Addr, error) {
	if n < 1 || n > 200 {
		return netip.Addr{}, fmt.Errorf("node number %d: want 1 to 200", n)
	}
	return netip.AddrFrom4([4]byte{10, 251, 0, byte(10 + n)}), nil
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: cluster up --root DIR --bin BINDIR
       cluster join --root DIR --node NAME --node-root NODEROOT --kubelet KUBELET.EXE [--kube-proxy KUBE-PROXY.EXE] [-- KUBELET FLAGS…]
       cluster down --root DIR
       cluster run --root DIR -- PROGRAM [ARGS…]`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = upCmd(os.Args[2:])
	case "serve":
		err = serveCmd(os.Args[2:])
	case "join":
		err = joinCmd(os.Args[2:])
	case "down":
		err = downCmd(os.Args[2:])
	case "run":
		err = runCmd(os.Args[2:])
	case "netns-exec":
		// netns-exec FILE PROGRAM ARGS…: how serve starts a process in the cluster's namespace.
		if len(os.Args) < 4 {
			usage()
		}
		err = hcsemu.ExecInNetns(os.Args[2], os.Args[3:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// flags are the flags up passes on to serve.
type flags struct {
	root, bin string
	kubeProxy string // how the nodes run kube-proxy: kubeProxyDaemonSet or kubeProxyProcess
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.root, "root", "", "the cluster's folder (required; it must be empty or hold only BINDIR)")
	fs.StringVar(&f.bin, "bin", "", "folder with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and coredns (hack/tools.sh kubernetes)")
	fs.StringVar(&f.kubeProxy, "kube-proxy", kubeProxyDaemonSet, "how the Windows nodes run kube-proxy.exe: daemonset (a HostProcess DaemonSet, kube-system/kube-proxy-windows) or process (a service of the node beside kubelet.exe)")
}

func (f *flags) validate() error {
	if f.root == "" || !filepath.IsAbs(f.root) {
		return fmt.Errorf("--root %q: an absolute folder is required", f.root)
	}
	if f.bin == "" {
		return fmt.Errorf("--bin %q: the folder with the control plane's binaries is required", f.bin)
	}
	if f.kubeProxy != kubeProxyDaemonSet && f.kubeProxy != kubeProxyProcess {
		return fmt.Errorf("--kube-proxy %q: want %s or %s", f.kubeProxy, kubeProxyDaemonSet, kubeProxyProcess)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(f.bin, b)); err != nil {
			return fmt.Errorf("--bin %s: %w", f.bin, err)
		}
	}
	return nil
}

// readEnv reads the export lines of the cluster's environment file.
func readEnv(root string) (map[string]string, error) {
	env, err := rootdir.ReadEnv(envFile(root))
	if err != nil {
		return nil, fmt.Errorf("no cluster at %s (is it up?): %w", root, err)
	}
	return env, nil
}

func envFile(root string) string      { return filepath.Join(root, "cluster.env") }
func netnsFile(root string) string    { return filepath.Join(root, "netns", "cluster") }
func kubeconfigOf(root string) string { return filepath.Join(root, "kubeconfig") }

// upCmd starts serve detached and waits until it has written cluster.env, or is gone.
func upCmd(args []string) error {
	var f flags
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	f.register(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the control plane")
	fs.Parse(args)
	if err := f.validate(); err != nil {
		return err
	}
	if entries, err := os.ReadDir(f.root); err == nil {
		for _, e := range entries {
			if filepath.Join(f.root, e.Name()) != filepath.Clean(f.bin) {
				return fmt.Errorf("--root %s: not empty (%s); is a cluster running there? (hack/cluster.sh down --root %s)", f.root, e.Name(), f.root)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(f.root, "logs"), 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(f.root, "logs", "serve.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "serve", "--root", f.root, "--bin", f.bin, "--kube-proxy", f.kubeProxy)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(*timeout)
	printed := 0
	printSteps := func() {
		b, _ := os.ReadFile(filepath.Join(f.root, "steps"))
		lines := strings.SplitAfter(string(b), "\n")
		for ; printed < len(lines) && strings.HasSuffix(lines[printed], "\n"); printed++ {
			fmt.Fprint(os.Stderr, "cluster: ", lines[printed])
		}
	}
	for {
		printSteps()
		if env, err := os.ReadFile(envFile(f.root)); err == nil {
			fmt.Print(string(env))
			return nil
		}
		select {
		case err := <-exited:
			printSteps()
			return fmt.Errorf("the control plane failed (%v); its log: %s (hack/cluster.sh down --root %s removes what is left)", err, logf.Name(), f.root)
		case <-deadline:
			return fmt.Errorf("the control plane was not up after %s; its log: %s", *timeout, logf.Name())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runCmd runs PROGRAM with the cluster's environment (KUBECONFIG, …) in the cluster's network
// namespace, where the API server's address answers. It replaces this process, so the
// program's exit status is the command's.
func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	root := fs.String("root", "", "the cluster's folder")
	fs.Parse(args)
	if *root == "" || fs.NArg() == 0 {
		usage()
	}
	env, err := readEnv(*root)
	if err != nil {
		return err
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	return hcsemu.ExecInNetns(netnsFile(*root), fs.Args())
}
