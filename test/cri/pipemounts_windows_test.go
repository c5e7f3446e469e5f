//go:build windows

package cri

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPipeMount maps a host named pipe into a container as kubelet sends a hostPath volume
// whose path is \\.\pipe\… (a Mount whose HostPath and ContainerPath are pipe paths; containerd
// passes them through, the shim makes a MappedPipe of them, in a Hyper-V pod after adding the
// pipe to the utility VM): the test serves the host pipe itself (go-winio, on the node's Windows
// side), and the container's client reaches it under the container's pipe name, both ways, and
// its end reaches the host's server. A host pipe that is not mapped is not there in the
// container.
func TestPipeMount(t *testing.T) {
	for _, handler := range []string{"", hypervHandler} {
		name := "process"
		if handler != "" {
			name = "hyperv"
		}
		t.Run(name, func(t *testing.T) { pipeMount(t, handler) })
	}
}

func pipeMount(t *testing.T, handler string) {
	n := connect(t)
	hostPipe := fmt.Sprintf(`\\.\pipe\runhcs-cri-%d`, time.Now().UnixNano())
	ln, err := winio.ListenPipe(hostPipe, nil)
	if err != nil {
		t.Fatalf("serve the host pipe %s: %v", hostPipe, err)
	}
	t.Cleanup(func() { ln.Close() })
	got, ended := make(chan string, 4), make(chan error, 4)
	go servePipe(ln, got, ended)

	podCfg := podConfig(t, "pod-pipe")
	pod, err := n.rt.RunPodSandbox(ctx(t), podCfg, handler)
	if err != nil {
		t.Fatalf("RunPodSandbox with handler %q: %v", handler, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		n.rt.StopPodSandbox(c, pod)
		n.rt.RemovePodSandbox(c, pod)
	})
	cfg := containerConfig("pipe-client", "sleep", "600")
	cfg.Mounts = []*runtimeapi.Mount{{HostPath: hostPipe, ContainerPath: `\\.\pipe\from-the-host`}}
	id := startContainer(t, n, pod, podCfg, cfg)

	stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{workload, "pipe", `\\.\pipe\from-the-host`, "hello from the pod"}, time.Minute)
	if err != nil || string(stdout) != "host pipe: hello from the pod\n" {
		t.Errorf("the container's pipe client: stdout %q, stderr %q, %v; want the host pipe's answer", stdout, stderr, err)
	}
	select {
	case line := <-got:
		if line != "hello from the pod\n" {
			t.Errorf("the host pipe's server read %q; want the container's line", line)
		}
	case <-time.After(rpcTimeout):
		t.Error("the host pipe's server got no connection")
	}
	// The client's exit closed its pipe: the host's server reads the end of it.
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the host pipe's server, at the container client's end: %v", err)
		}
	case <-time.After(rpcTimeout):
		t.Error("the host pipe's server did not see the container client's end")
	}

	// The host's pipe under its own name is not in the container: only what is mapped is.
	_, _, err = n.rt.ExecSync(ctx(t), id, []string{workload, "pipe", hostPipe, "not mapped"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() == 0 {
		t.Errorf("open the host pipe by its host name in the container: %v; want a failing exit", err)
	}
	select {
	case line := <-got:
		t.Errorf("the host pipe's server read %q from an unmapped name", line)
	default:
	}
}

// servePipe answers each client of the host pipe: it reads one line, reports it on got, and
// answers "host pipe: LINE"; then it waits for the client's close and reports how it ended on
// ended (nil: the end of the stream, with nothing more sent).
func servePipe(ln net.Listener, got chan<- string, ended chan<- error) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(rpcTimeout))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			got <- line
			if _, err := io.WriteString(c, "host pipe: "+line); err != nil {
				ended <- err
				return
			}
			b, err := io.ReadAll(c)
			if err == nil && len(b) > 0 {
				err = fmt.Errorf("the client sent %q more", b)
			}
			ended <- err
		}()
	}
}
