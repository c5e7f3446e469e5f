package compute

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// Host named pipes mapped into a process-isolated container (Container.MappedPipes, and the
// Container/MappedPipes Modify): on Windows a process of the container opens
// \\.\pipe\<ContainerPipeName> and reaches the host's pipe MappedPipe.HostPath (hcsshim maps a
// mount whose source is \\.\pipe\… this way: internal/hcsoci/hcsdoc_wcow.go createMountsConfig,
// internal/uvm/pipes.go ParseNamedPipe).
//
// Linux has no named pipe file system, and the host pipe is not the emulator's to open: it lives
// on the client's Windows side (under Wine, in wineserver, which only Wine processes talk to).
// So the emulator does two things:
//   - inside the container, the pipe is the unix socket \pipe\<name> (the Linux path /pipe/<name>
//     of the container's root): a folder of the daemon's holding one listening socket per mapped
//     pipe, bound read-only at C:\pipe as a mapped directory is (assumption: the folder is the
//     emulator's stand-in for the named pipe file system; Windows shows nothing on C:);
//   - when a process connects, the daemon asks a client that holds the system and can reach the
//     host's pipes (the stand-in computecore.dll on TCP, pipeRelayer) to open the host pipe and
//     attach it (wire.PipeConnect, wire.MethodAttachPipe; internal/hcsemu/server's
//     tcp_linux.go); the bytes then flow through the daemon between the container's socket and
//     the client's connection.
//
// A container in a utility VM maps the VM's pipes (VirtualMachine/Devices/MappedPipes, named by
// schema2.VSMBGuestPipePath): it gets the same socket, relayed to the host pipe the VM was given.
//
// A client that cannot open Windows pipes (the unix socket: the Linux build of the shim) gets a
// document with MappedPipes refused at create, rather than a pipe that no one can serve.

// pipeFolder is where a container finds its mapped pipes (see above); pipesFolder, in the
// daemon's root, holds a folder of sockets per system instance.
const (
	pipeFolder  = `C:\pipe`
	pipesFolder = "pipes"
)

// pipeRelayer is a subscriber that can open the host's named pipes and relay them (the server's
// TCP connections: the stand-in DLL, which runs under Wine beside the pipe's server).
type pipeRelayer = dispatch.PipeRelayer

// mappedPipe is one host pipe mapped into a container: its listening socket.
type mappedPipe struct {
	mp schema2.MappedPipe
	ln *net.UnixListener
}

// pipeState is a container's mapped pipes, guarded by the system's lock (the accept loops do
// not touch it).
type pipeState struct {
	dir   string                 // the daemon's folder of sockets, mapped at pipeFolder
	dirF  *os.File               // dir, open: sockets are bound through it (sun_path is short)
	pipes map[string]*mappedPipe // by lower-cased container pipe name
}

// checkPipeRelayer refuses a document with mapped pipes from a client that cannot serve them.
func checkPipeRelayer(cs *schema2.ComputeSystem, sub Subscriber) error {
	c, field := cs.Container, "Container"
	if hs, ok := cs.HostedSystem.(*schema2.HostedSystem); ok {
		c, field = hs.Container, "HostedSystem.Container"
	}
	if c == nil || len(c.MappedPipes) == 0 {
		return nil
	}
	if r, ok := sub.(pipeRelayer); ok && r.CanRelayPipes() {
		return nil
	}
	return hresult.Errorf(computecore.E_NOTIMPL, "%s.MappedPipes[0]: %q: host named pipes are mapped only for a client that can open them (the stand-in computecore.dll under Wine); this client's connection has no Windows side", field, c.MappedPipes[0].HostPath)
}

// mapPipesLocked maps the document's pipes into a process-isolated container whose volume is
// open.
func (s *system) mapPipesLocked(ctx context.Context, mps []schema2.MappedPipe) error {
	for i := range mps {
		if err := s.addPipeLocked(ctx, mps[i]); err != nil {
			return prefixField(err, fmt.Sprintf("Container.MappedPipes[%d].", i))
		}
	}
	return nil
}

// addPipeLocked maps one pipe: the folder of sockets first, then the pipe's socket.
func (s *system) addPipeLocked(ctx context.Context, mp schema2.MappedPipe) error {
	if err := ValidateMappedPipe("Settings", &mp); err != nil {
		return err
	}
	if s.vol == nil {
		return hresult.Errorf(computecore.E_NOT_SUPPORTED, "compute system %q has no storage to map pipes into", s.id)
	}
	if s.pipes == nil {
		dir := filepath.Join(s.e.cfg.Root, pipesFolder, strconv.FormatUint(s.instance, 10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "the folder of compute system %q's pipes: %v", s.id, err)
		}
		// The container's users connect: the folder is open to them, read-only (below).
		if err := os.Chmod(dir, 0o755); err != nil {
			os.RemoveAll(dir)
			return hresult.Errorf(computecore.E_FAIL, "the folder of compute system %q's pipes: %v", s.id, err)
		}
		dirF, err := os.Open(dir)
		if err != nil {
			os.RemoveAll(dir)
			return hresult.Errorf(computecore.E_FAIL, "the folder of compute system %q's pipes: %v", s.id, err)
		}
		// Connecting to a socket needs no write access to its file system, so the folder is
		// mapped read-only: the container cannot replace a pipe with a socket of its own.
		if err := s.mapLocked(schema2.MappedDirectory{HostPath: dir, ContainerPath: pipeFolder, ReadOnly: true}); err != nil {
			dirF.Close()
			os.RemoveAll(dir)
			return prefixField(err, "MappedPipes (at "+pipeFolder+"): ")
		}
		s.pipes = &pipeState{dir: dir, dirF: dirF, pipes: map[string]*mappedPipe{}}
	}
	p := s.pipes
	key := strings.ToLower(mp.ContainerPipeName)
	if _, dup := p.pipes[key]; dup {
		return hresult.Errorf(errAlreadyExists, "ContainerPipeName: %q is already mapped in compute system %q", mp.ContainerPipeName, s.id)
	}
	// Bound through the open folder: the daemon's root can make the full path longer than a
	// socket address may be.
	addr := &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/%s", p.dirF.Fd(), key), Net: "unix"}
	ln, err := net.ListenUnix("unix", addr)
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "ContainerPipeName: %q: %v", mp.ContainerPipeName, err)
	}
	ln.SetUnlinkOnClose(false) // removed by name below: the bound path goes through a descriptor
	if err := os.Chmod(filepath.Join(p.dir, key), 0o666); err != nil {
		ln.Close()
		os.Remove(filepath.Join(p.dir, key))
		return hresult.Errorf(computecore.E_FAIL, "ContainerPipeName: %q: %v", mp.ContainerPipeName, err)
	}
	m := &mappedPipe{mp: mp, ln: ln}
	p.pipes[key] = m
	// Not waited for: a connection accepted as the system stops may wait for the system's
	// lock (relayPipe), which the stop holds; it ends once the listener is closed.
	go s.acceptPipe(context.WithoutCancel(ctx), m)
	return nil
}

// removePipeLocked unmaps one pipe: connections already relayed go on, as an open handle on
// Windows outlives the mapping (assumption).
func (s *system) removePipeLocked(mp schema2.MappedPipe) error {
	key := strings.ToLower(mp.ContainerPipeName)
	if s.pipes == nil {
		return hresult.Errorf(computecore.E_ELEMENT_NOT_FOUND, "ContainerPipeName: %q is not mapped in compute system %q", mp.ContainerPipeName, s.id)
	}
	p := s.pipes
	m, ok := p.pipes[key]
	delete(p.pipes, key)
	if !ok {
		return hresult.Errorf(computecore.E_ELEMENT_NOT_FOUND, "ContainerPipeName: %q is not mapped in compute system %q", mp.ContainerPipeName, s.id)
	}
	m.ln.Close()
	os.Remove(filepath.Join(p.dir, key))
	return nil
}

// closePipesLocked closes every pipe's socket and removes the folder, when the system stops;
// the mapping of the folder goes with the other mapped directories (unmapAllLocked).
// Connections already relayed end with the container's processes.
func (s *system) closePipesLocked() {
	p := s.pipes
	if p == nil {
		return
	}
	for key, m := range p.pipes {
		m.ln.Close()
		delete(p.pipes, key)
	}
	p.dirF.Close()
	os.RemoveAll(p.dir)
	s.pipes = nil
}

// acceptPipe serves one mapped pipe's socket until it is closed: each connection of a process
// of the container goes to a client that can open the host pipe.
func (s *system) acceptPipe(ctx context.Context, m *mappedPipe) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithFields(log.Fields{"system": s.id, "hostPipe": m.mp.HostPath, "containerPipe": m.mp.ContainerPipeName}))
	for {
		c, err := m.ln.AcceptUnix()
		if err != nil {
			return
		}
		if err := s.relayPipe(ctx, m.mp.HostPath, c); err != nil {
			log.G(ctx).WithError(err).Warn("hcsemu: a process of the container opened a mapped pipe that no client can serve; closed")
			c.Close()
		}
	}
}

// relayPipe hands c to the first client holding the system that can relay pipes.
func (s *system) relayPipe(ctx context.Context, hostPipe string, c net.Conn) error {
	s.mu.Lock()
	var relayers []pipeRelayer
	for sub := range s.refs {
		if r, ok := sub.(pipeRelayer); ok && r.CanRelayPipes() {
			relayers = append(relayers, r)
		}
	}
	ref := s.ref()
	s.mu.Unlock()
	if len(relayers) == 0 {
		return fmt.Errorf("no client with a Windows side holds compute system %q", s.id)
	}
	return relayers[0].RelayPipe(ctx, ref, hostPipe, c)
}
