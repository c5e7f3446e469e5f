package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/hcsemu/wire/wiretest"
)

// TestDaemonMappedPipes maps a host pipe into a process-isolated container created by a TCP
// client (as the stand-in computecore.dll does) and plays that client's part: when the
// container's workload opens \\.\pipe\<name>, the daemon sends a PipeConnect event naming the
// host pipe, and the bytes flow both ways over the AttachPipe connection. A client that cannot
// open the host pipe makes the container's open fail; a pipe that is not mapped is not there; the
// container cannot replace a pipe; a unix client, which has no Windows side, is refused.
func TestDaemonMappedPipes(t *testing.T) {
	d := startDaemon(t)
	c := dialTCP(t, d.tcpAddr)
	vol := newVolume(t)
	const hostPipe = `\\.\pipe\Host-Side`
	doc := containerConfig(vol, `,"MappedPipes":[{"HostPath":"\\\\.\\pipe\\Host-Side","ContainerPipeName":"In-Container"}]`)
	f := c.call(wire.MethodCreateComputeSystem, wire.CreateSystemArgs{ID: "pipes", Configuration: doc})
	var sys wire.SystemReply
	if err := f.DecodeReply(&sys); err != nil || f.HResult != 0 {
		t.Fatalf("create over TCP: hresult %#x, result %s, %v", f.HResult, f.Result, err)
	}
	ref := wire.SystemRef{ID: "pipes", Instance: sys.Instance}
	if f := c.call(wire.MethodStartComputeSystem, wire.SystemArgs{System: ref}); f.HResult != 0 {
		t.Fatalf("start: hresult %#x, %s", f.HResult, f.Result)
	}
	run := func(cmd string) (pid uint32, stdout chan string) {
		t.Helper()
		params, _ := json.Marshal(schema2.ProcessParameters{CommandLine: prog + " " + cmd, CreateStdOutPipe: true})
		f := c.call(wire.MethodCreateProcess, wire.CreateProcessArgs{System: ref, Parameters: string(params)})
		var pr wire.ProcessReply
		if err := f.DecodeReply(&pr); err != nil || f.HResult != 0 {
			t.Fatalf("create process %q: hresult %#x, result %s, %v", cmd, f.HResult, f.Result, err)
		}
		out := wiretest.AttachStdio(t, d.tcpAddr, testKey, pr.StdioToken, wire.StdOut)
		stdout = make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(out)
			stdout <- string(b)
		}()
		return pr.PID, stdout
	}
	// pipeConnect waits for the daemon's next PipeConnect event.
	pipeConnect := func() *wire.PipeConnect {
		t.Helper()
		for {
			for i, ev := range c.events {
				if ev.Pipe != nil {
					c.events = append(c.events[:i], c.events[i+1:]...)
					if ev.System != ref || ev.Type != 0 {
						t.Errorf("pipe event %+v: want system %+v and type 0 (no HCS notification)", ev, ref)
					}
					return ev.Pipe
				}
			}
			c.next()
		}
	}
	attach := func(token string, win32Error uint32) net.Conn {
		t.Helper()
		nc := wiretest.Dial(t, d.tcpAddr, testKey)
		f, err := wire.NewRequest(1, wire.MethodAttachPipe, wire.AttachPipeArgs{Token: token, Error: win32Error})
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.WriteFrame(nc, f); err != nil {
			t.Fatal(err)
		}
		return nc
	}

	// A container ends with its last process: keep one running while the others come and go.
	params, _ := json.Marshal(schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	if f := c.call(wire.MethodCreateProcess, wire.CreateProcessArgs{System: ref, Parameters: string(params)}); f.HResult != 0 {
		t.Fatalf("create the sleeper: hresult %#x, %s", f.HResult, f.Result)
	}

	// The container's client reaches the host pipe (the name is case-insensitive) and back.
	pid, stdout := run(`pipe \\.\pipe\IN-container hello`)
	pc := pipeConnect()
	if pc.HostPath != hostPipe || pc.Token == "" {
		t.Fatalf("PipeConnect %+v: want host pipe %s and a token", pc, hostPipe)
	}
	host := attach(pc.Token, 0)
	host.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(host).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("the host pipe's server read %q, %v; want the container's line", line, err)
	}
	if _, err := io.WriteString(host, "host got: "+line); err != nil {
		t.Fatal(err)
	}
	if got := <-stdout; got != "host got: hello\n" {
		t.Errorf("the container's client printed %q; want the host's answer", got)
	}
	if code := c.processExit(pid); code != 0 {
		t.Errorf("pipe client exit code %d, want 0", code)
	}
	// The container's close reaches the host side as the end of the stream.
	if b, err := io.ReadAll(host); err != nil || len(b) != 0 {
		t.Errorf("after the container's close the host side read %q, %v; want the end", b, err)
	}
	host.Close()
	// A second token is not the first one again: a used token attaches nothing.
	stale := attach(pc.Token, 0)
	stale.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := stale.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("AttachPipe with a used token: read %d, %v; want the connection closed", n, err)
	}

	// The client could not open the host pipe (ERROR_FILE_NOT_FOUND): the open in the container
	// fails.
	pid, stdout = run(`pipe \\.\pipe\in-container again`)
	attach(pipeConnect().Token, 2)
	<-stdout
	if code := c.processExit(pid); code == 0 {
		t.Error("pipe client whose host pipe could not be opened: exit code 0, want a failure")
	}
	// A pipe that is not mapped is not there, and the container cannot add one.
	pid, _ = run(`pipe \\.\pipe\not-mapped x`)
	if code := c.processExit(pid); code == 0 {
		t.Error("pipe client of an unmapped pipe: exit code 0, want a failure")
	}
	pid, _ = run(`write C:\pipe\in-container replaced`)
	if code := c.processExit(pid); code == 0 {
		t.Error("the container replaced a mapped pipe (wrote C:\\pipe\\in-container)")
	}

	// The system's end removes the sockets' folder.
	dir := filepath.Join(d.engine.cfg.Root, "pipes", strconv.FormatUint(sys.Instance, 10))
	if _, err := os.Stat(filepath.Join(dir, "in-container")); err != nil {
		t.Fatalf("the pipe's socket: %v", err)
	}
	if f := c.call(wire.MethodTerminateComputeSystem, wire.SystemArgs{System: ref}); f.HResult != 0 {
		t.Fatalf("terminate: hresult %#x, %s", f.HResult, f.Result)
	}
	for exited := false; !exited; {
		for _, ev := range c.events {
			exited = exited || ev.Type == computecore.EventSystemExited
		}
		if !exited {
			c.next()
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pipes' folder after the system's end: %v", err)
	}

	// A unix client cannot open the host's pipes: refused at create, naming the field.
	api := dial(t, d)
	op, err := api.CreateOperation(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseOperation(op)
	if _, err := api.CreateComputeSystem("pipes-unix", containerConfig(newVolume(t), `,"MappedPipes":[{"HostPath":"\\\\.\\pipe\\p","ContainerPipeName":"p"}]`), op, 0); err == nil {
		doc, err := api.WaitForOperationResult(op, opTimeout)
		if !errors.Is(err, computecore.E_NOTIMPL) || !strings.Contains(doc, "Container.MappedPipes[0]") {
			t.Errorf("mapped pipe for a unix client: %v (%s); want E_NOTIMPL naming Container.MappedPipes[0]", err, doc)
		}
	} else if !errors.Is(err, computecore.E_NOTIMPL) {
		t.Errorf("mapped pipe for a unix client: %v; want E_NOTIMPL", err)
	}
}

func TestValidateMappedPipe(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mp    schema2.MappedPipe
		want  computecore.HRESULT
		field string
	}{
		{"ok", schema2.MappedPipe{HostPath: `\\.\PIPE\docker_engine`, ContainerPipeName: "docker_engine"}, 0, ""},
		{"no name", schema2.MappedPipe{HostPath: `\\.\pipe\p`}, computecore.HCS_E_INVALID_JSON, "ContainerPipeName"},
		{"no host path", schema2.MappedPipe{ContainerPipeName: "p"}, computecore.HCS_E_INVALID_JSON, "HostPath"},
		{"host path not a pipe", schema2.MappedPipe{HostPath: `C:\p`, ContainerPipeName: "p"}, computecore.E_INVALIDARG, "HostPath"},
		{"bare pipe prefix", schema2.MappedPipe{HostPath: `\\.\pipe\`, ContainerPipeName: "p"}, computecore.E_INVALIDARG, "HostPath"},
		{"name with a backslash", schema2.MappedPipe{HostPath: `\\.\pipe\p`, ContainerPipeName: `a\b`}, computecore.E_INVALIDARG, "ContainerPipeName"},
		{"name that climbs", schema2.MappedPipe{HostPath: `\\.\pipe\p`, ContainerPipeName: ".."}, computecore.E_INVALIDARG, "ContainerPipeName"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMappedPipe("Container.MappedPipes[0]", &tt.mp)
			if tt.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "Container.MappedPipes[0]."+tt.field) {
				t.Errorf("%v; want %v naming Container.MappedPipes[0].%s", err, tt.want, tt.field)
			}
		})
	}
}

// TestEngineRemovesDeadPipes: a daemon starting on the root of a dead one removes the sockets
// of its mapped pipes, whose names the new daemon's systems (numbered from 1 again) would
// otherwise find taken.
func TestEngineRemovesDeadPipes(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	stale := filepath.Join(root, pipesFolder, "1")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(stale, "p"))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	e, err := NewEngine(context.Background(), Config{Root: root, OSVersion: "10.0.20348.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if _, err := os.Stat(filepath.Join(root, pipesFolder)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead daemon's pipes after a new daemon's start: %v", err)
	}
}

// pipeRecorder is a subscriber with a Windows side, as the stand-in DLL's connection is: the
// connections it is asked to relay come out on relays.
type pipeRecorder struct {
	*recorder
	relays chan relayed
}

type relayed struct {
	sys      wire.SystemRef
	hostPipe string
	c        net.Conn
}

func (p *pipeRecorder) CanRelayPipes() bool { return true }

func (p *pipeRecorder) RelayPipe(_ context.Context, sys wire.SystemRef, hostPipe string, c net.Conn) error {
	p.relays <- relayed{sys, hostPipe, c}
	return nil
}

// TestHostedMappedPipe maps a pipe of a utility VM (VirtualMachine/Devices/MappedPipes) into a
// container in it, as hcsshim does for a Hyper-V pod's \\.\pipe\ mount: the container's client
// reaches the host pipe the VM was given. A subscriber without a Windows side is refused.
func TestHostedMappedPipe(t *testing.T) {
	e := newVMEngine(t, "10.0.20348.1", 0)
	startVM(t, e, "p@vm", "10.0.20348.1", 128)
	if err := modify(e, "p@vm", schema2.ModifySettingRequest{ResourcePath: fmt.Sprintf(schema2.ResourcePathMappedPipeFormat, `\\.\pipe\Host-P`), RequestType: schema2.RequestTypeAdd}); err != nil {
		t.Fatal(err)
	}
	layer := newLayer(t, "10.0.20348.1", false)
	withPipe := func(c *schema2.Container) {
		c.MappedPipes = []schema2.MappedPipe{{HostPath: schema2.VSMBGuestPipePath("host-p"), ContainerPipeName: "in-vm"}}
	}
	sub := &pipeRecorder{recorder: newRecorder(), relays: make(chan relayed, 1)}
	if _, err := hostContainerWith(t, e, "p@vm", "c1", layer, sub, withPipe); err != nil {
		t.Fatalf("hosted container with the VM's pipe: %v", err)
	}
	if _, err := hostContainerWith(t, e, "p@vm", "c2", layer, newRecorder(), withPipe); !errors.Is(err, computecore.E_NOTIMPL) || !strings.Contains(err.Error(), "HostedSystem.Container.MappedPipes[0]") {
		t.Errorf("a hosted container with a pipe for a subscriber without a Windows side: %v; want E_NOTIMPL naming the field", err)
	}
	runInBackground(t, e, "c1", `C:\workload\workload.exe sleep 600`)
	served := make(chan string, 1)
	go func() {
		select {
		case r := <-sub.relays:
			defer r.c.Close()
			if r.hostPipe != `\\.\pipe\Host-P` || r.sys.ID != "c1" {
				served <- fmt.Sprintf("relay of %q for %+v; want the VM's host pipe for c1", r.hostPipe, r.sys)
				return
			}
			r.c.SetDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(r.c).ReadString('\n')
			if err != nil {
				served <- "read: " + err.Error()
				return
			}
			io.WriteString(r.c, "vm host: "+line)
			served <- line
		case <-time.After(60 * time.Second):
			served <- "no relay within 60s"
		}
	}()
	code, out := runIn(t, e, "c1", `C:\workload\workload.exe pipe \\.\pipe\in-vm hi`)
	if got := <-served; got != "hi\n" {
		t.Errorf("the host side: %s", got)
	}
	if code != 0 || out != "vm host: hi\n" {
		t.Errorf("the hosted container's pipe client: exit %d, %q; want the host's answer", code, out)
	}
}
