//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openhcs/runhcs/internal/hcsemu"
	"github.com/openhcs/runhcs/test/image"
)

// imageCmd pushes an image of Windows programs into the node's registry, where the node's
// containerd pulls it from under any registry name: the HostProcess test image
// (HostProcessImage: the Windows build of the workload in a Windows base layer) with one more
// layer holding the given files. It is how a cluster gives its nodes the image of a node agent
// run as a HostProcess DaemonSet (kube-proxy.exe: test/cluster), as an operator pushes one to
// the registry their nodes pull from.
//
//	winnode image --root DIR --ref REPO:TAG FILE=PATH…   PATH: where FILE is in the image's C:\, with /
func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	root := fs.String("root", "", "the node's folder")
	ref := fs.String("ref", "", "the image's repository and tag in the node's registry (runhcs/kube-proxy:v1.37.2); the node pulls it under any registry name")
	fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return fmt.Errorf("--root %q: the node's absolute folder is required", *root)
	}
	repo, tag, ok := strings.Cut(*ref, ":")
	if !ok || repo == "" || tag == "" || strings.Contains(tag, "/") || strings.ContainsAny(repo, ".:@ ") {
		return fmt.Errorf("--ref %q: want REPOSITORY:TAG without a registry name (runhcs/kube-proxy:v1.37.2)", *ref)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("image: want at least one FILE=PATH, a file and where it goes in the image")
	}
	// Uncompressed: programs of tens of MB (kube-proxy.exe) gzip slowly and gain little.
	layer := image.Layer{Comment: "files of " + *ref, Uncompressed: true}
	for _, a := range fs.Args() {
		src, dst, ok := strings.Cut(a, "=")
		dst = strings.Trim(strings.ReplaceAll(dst, `\`, "/"), "/")
		if !ok || src == "" || dst == "" || strings.Contains("/"+dst+"/", "/../") || strings.Contains(dst, ":") {
			return fmt.Errorf("image: %q: want FILE=PATH, PATH relative to the image's C:\\ without \"..\"", a)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("image: %q: %w", a, err)
		}
		layer.Entries = append(layer.Entries, image.Entry{Path: "Files/" + dst, Data: data})
	}
	env, err := readEnv(*root)
	if err != nil {
		return err
	}
	registryAddr := env["RUNHCS_NODE_REGISTRY"]
	if registryAddr == "" {
		return fmt.Errorf("the node at %s names no registry (RUNHCS_NODE_REGISTRY in %s)", *root, envFile(*root))
	}
	workloadPE, err := os.ReadFile(filepath.Join(*root, "bin", "workload.exe"))
	if err != nil {
		return fmt.Errorf("the node's Windows workload: %w", err)
	}
	img := image.Default(workloadPE)
	img.Layers = append(img.Layers, layer)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := push(ctx, hostTransport(*root), registryAddr+"/"+repo+":"+tag, img, false); err != nil {
		return fmt.Errorf("push %s: %w", *ref, err)
	}
	return nil
}

// hostTransport dials in the emulated host's network namespace of the node at root, where its
// registry and its Windows processes listen; never through a proxy of this machine's, which
// could not reach them.
func hostTransport(root string) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		var c net.Conn
		err := hcsemu.InHostNetns(emuRoot(root), func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, a)
			return err
		})
		return c, err
	}
	return tr
}
