//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/internal/rootdir"
)

func usage() {
	fmt.Fprintln(os.Stderr, `usage: winnode up --root DIR --bin BINDIR --wine-prefix PREFIX [--containerd 2|1.7] [--snapshotter windows|wcow] [--sandboxer podsandbox|shim] [--pod-subnet CIDR] [--cluster-cidr CIDR]
       winnode down --root DIR
       winnode run --root DIR [--shim-kills] -- PROGRAM [ARGS…]
       winnode kubelet --root DIR --exe KUBELET.EXE [--kubeconfig FILE] [--node-name NAME] [-- KUBELET FLAGS…]
       winnode kube-proxy --root DIR --exe KUBE-PROXY.EXE --kubeconfig FILE [--node-name NAME] [-- KUBE-PROXY FLAGS…]
       winnode wait-kube-proxy --root DIR [--timeout D]
       winnode image --root DIR --ref REPO:TAG FILE=PATH…
       winnode restart --root DIR kubelet|kube-proxy|containerd`)
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
	case "down":
		err = downCmd(os.Args[2:])
	case "run":
		err = runCmd(os.Args[2:])
	case "kubelet":
		err = kubeletCmd(os.Args[2:])
	case "kube-proxy":
		err = kubeProxyCmd(os.Args[2:])
	case "wait-kube-proxy":
		err = waitKubeProxyCmd(os.Args[2:])
	case "image":
		err = imageCmd(os.Args[2:])
	case "restart":
		err = restartCmd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "winnode %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// nodeFlags are the flags up passes on to serve.
type nodeFlags struct {
	root, bin, prefix, snapshotter, containerd, sandboxer string
	podSubnet, clusterCIDR                                string
	pods                                                  podNetwork // from podSubnet and clusterCIDR, by validate
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.root, "root", "", "the node's folder (required; it must be empty or not exist)")
	fs.StringVar(&f.bin, "bin", "", "folder with containerd.exe, ctr.exe, containerd-shim-runhcs-v1.exe, containerd-wcow-snapshotter.exe, win-bridge.exe, host-local.exe, hcsemu and workload (the test images' Linux workload)")
	fs.StringVar(&f.prefix, "wine-prefix", "", "the Wine prefix with the stand-in DLLs (hack/wine/setup.sh) to copy as the node's private prefix")
	fs.StringVar(&f.snapshotter, "snapshotter", "wcow", "wcow (this project's snapshotter as containerd's proxy plugins) or windows (containerd's built-in)")
	fs.StringVar(&f.sandboxer, "sandboxer", "podsandbox", "how CRI runs the runhcs-wcow-process handler's pods: podsandbox (a pause container) or shim (containerd 2.x's sandbox API, served by the shim)")
	fs.StringVar(&f.podSubnet, "pod-subnet", defaultPodSubnet, "the node's pod subnet: its HNS L2Bridge network's, whose .2 is the gateway (IPv4, /16 to /27; in a cluster each node has its own, the Node's podCIDR)")
	fs.StringVar(&f.clusterCIDR, "cluster-cidr", defaultClusterCIDR, "the cluster's pod CIDR, holding every node's pod subnet: pods' traffic to it is not NATed (win-bridge's ipMasqNetwork, the OutBoundNAT exception)")
	fs.StringVar(&f.containerd, "containerd", "2", "containerd version: 2 (2.4.2) or 1.7 (1.7.35); BINDIR's containerd.exe and ctr.exe must be that version's Windows build")
}

func (f *nodeFlags) validate() error {
	if f.root == "" || !filepath.IsAbs(f.root) {
		return fmt.Errorf("--root %q: an absolute folder is required", f.root)
	}
	f.root = filepath.Clean(f.root) // as down cleans it: the node's marker holds it
	if f.bin == "" || f.prefix == "" {
		return fmt.Errorf("--bin %q and --wine-prefix %q are required", f.bin, f.prefix)
	}
	if f.snapshotter != "wcow" && f.snapshotter != "windows" {
		return fmt.Errorf("--snapshotter %q: want wcow or windows", f.snapshotter)
	}
	if f.containerd != "2" && f.containerd != "1.7" {
		return fmt.Errorf("--containerd %q: want 2 (containerd 2.4.2) or 1.7 (containerd 1.7.35)", f.containerd)
	}
	switch f.sandboxer {
	case "podsandbox":
	case "shim":
		if f.containerd == "1.7" {
			// 1.7's CRI has a sandbox API only in its experimental sbserver (ENABLE_CRI_SANDBOXES,
			// pkg/cri/cri.go), with another key (sandbox_mode): not supported here.
			return fmt.Errorf("--sandboxer shim: containerd 1.7 has no sandbox API (only 2.x's CRI runs a pod through the shim's); use --containerd 2, or --sandboxer podsandbox")
		}
	default:
		return fmt.Errorf("--sandboxer %q: want podsandbox or shim", f.sandboxer)
	}
	var err error
	f.pods, err = newPodNetwork(f.podSubnet, f.clusterCIDR)
	return err
}

func (f *nodeFlags) args() []string {
	return []string{"--root", f.root, "--bin", f.bin, "--wine-prefix", f.prefix, "--snapshotter", f.snapshotter, "--containerd", f.containerd, "--sandboxer", f.sandboxer,
		"--pod-subnet", f.podSubnet, "--cluster-cidr", f.clusterCIDR}
}

// upCmd starts serve detached and waits for it to be ready (node.env written) or gone.
func upCmd(args []string) error {
	var f nodeFlags
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	f.register(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the node")
	fs.Parse(args)
	if err := f.validate(); err != nil {
		return err
	}
	if entries, err := os.ReadDir(f.root); err == nil && len(entries) > 0 {
		// Only the script's bin folder may be there already.
		for _, e := range entries {
			if filepath.Join(f.root, e.Name()) != filepath.Clean(f.bin) {
				return fmt.Errorf("--root %s: not empty (%s); is a node running there? (winnode down --root %s)", f.root, e.Name(), f.root)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(f.root, "logs"), 0o755); err != nil {
		return err
	}
	// down may need the emulator after a crash, to clean up what it left.
	if err := os.WriteFile(filepath.Join(f.root, "hcsemu.path"), []byte(filepath.Join(f.bin, "hcsemu")), 0o644); err != nil {
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
	cmd := exec.Command(self, append([]string{"serve"}, f.args()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// serve writes each step's timing as it goes, and node.env last.
	deadline := time.After(*timeout)
	printed := 0
	printSteps := func() {
		b, _ := os.ReadFile(filepath.Join(f.root, "steps"))
		lines := strings.SplitAfter(string(b), "\n")
		for ; printed < len(lines) && strings.HasSuffix(lines[printed], "\n"); printed++ {
			fmt.Fprint(os.Stderr, "winnode: ", lines[printed])
		}
	}
	for {
		printSteps()
		if env, err := os.ReadFile(envFile(f.root)); err == nil {
			fmt.Print(string(env))
			fmt.Fprintf(os.Stderr, "winnode: up; environment in %s; stop with: hack/winnode.sh down --root %s\n", envFile(f.root), f.root)
			return nil
		}
		select {
		case err := <-exited:
			printSteps()
			return fmt.Errorf("the node failed (%v); its log: %s (winnode down --root %s removes what is left)", err, logf.Name(), f.root)
		case <-deadline:
			return fmt.Errorf("the node was not up after %s; its log: %s", *timeout, logf.Name())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readEnv reads the export lines of the node's environment file.
func readEnv(root string) (map[string]string, error) {
	env, err := rootdir.ReadEnv(envFile(root))
	if err != nil {
		return nil, fmt.Errorf("no node at %s (is it up?): %w", root, err)
	}
	return env, nil
}

func envFile(root string) string { return filepath.Join(root, "node.env") }

// runCmd runs PROGRAM with the node's environment in the emulated host's network namespace,
// a Windows .exe under the node's Wine loader. It replaces this process, so the program's exit
// status is the command's. With --shim-kills it runs PROGRAM as its child instead and, until it
// ends, SIGKILLs the pods' shims PROGRAM asks it to (shimkill_linux.go), then exits with its
// status.
func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	root := fs.String("root", "", "the node's folder")
	kills := fs.Bool("shim-kills", false, "serve the program's requests to SIGKILL a pod's shim (files in DIR/shim-kills)")
	fs.Parse(args)
	if *root == "" || fs.NArg() == 0 {
		usage()
	}
	if *kills {
		return runWithShimKills(*root, fs.Args())
	}
	env, err := readEnv(*root)
	if err != nil {
		return err
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	argv := fs.Args()
	if strings.HasSuffix(strings.ToLower(argv[0]), ".exe") {
		argv = append([]string{env["WINE64"]}, argv...)
	}
	return hcsemu.ExecInHostNetns(emuRoot(*root), argv)
}

func emuRoot(root string) string { return filepath.Join(root, "emu") }

// runWithShimKills runs `winnode run --root root -- argv…` as a child and serves its shim kill
// requests until it ends; it exits with the child's status.
func runWithShimKills(root string, argv []string) error {
	if _, err := readEnv(root); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"run", "--root", root, "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// An earlier run's answers must not answer this run's requests.
	if err := os.RemoveAll(shimKillDir(root)); err != nil {
		return err
	}
	if err := os.MkdirAll(shimKillDir(root), 0o755); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- serveShimKills(root, stop) }()
	werr := cmd.Wait()
	close(stop)
	if err := <-served; err != nil {
		return fmt.Errorf("shim kills: %w", err)
	}
	if werr != nil {
		if ee, ok := werr.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		return werr
	}
	return nil
}
