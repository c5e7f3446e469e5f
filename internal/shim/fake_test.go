package shim

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/layers"
	"github.com/openhcs/runhcs/internal/shim/task"
)

// errGone is what the fakes return for a system or process that is gone, as internal/hcs does.
var errGone = fmt.Errorf("fake: gone: %w", hcs.ErrNotFound)

type fakeHost struct {
	mu        sync.Mutex
	systems   map[string]*fakeSystem
	createErr error
	startErr  error
	// staleCreated makes the handle CreateComputeSystem returns fail to terminate (as a handle
	// whose HCS operation timed out does); a handle from OpenComputeSystem still works.
	staleCreated bool
	ccg          map[string]*schema2.ContainerCredentialGuardInstance
}

func newFakeHost() *fakeHost { return &fakeHost{systems: map[string]*fakeSystem{}} }

func (h *fakeHost) CreateComputeSystem(ctx context.Context, id string, doc any) (task.System, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.createErr != nil {
		return nil, h.createErr
	}
	if _, ok := h.systems[id]; ok {
		return nil, errdefs.ErrAlreadyExists
	}
	s := &fakeSystem{host: h, id: id, doc: doc, exited: make(chan struct{}), startErr: h.startErr}
	h.systems[id] = s
	if h.staleCreated {
		return staleSystem{s}, nil
	}
	return s, nil
}

// staleSystem is a handle whose Terminate fails without reaching the system.
type staleSystem struct{ *fakeSystem }

func (staleSystem) Terminate(context.Context) error {
	return errors.New("fake: the handle's operation timed out")
}

func (h *fakeHost) OpenComputeSystem(ctx context.Context, id string) (task.System, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.systems[id]
	if !ok {
		return nil, errGone
	}
	return s, nil
}

func (h *fakeHost) system(id string) *fakeSystem {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.systems[id]
}

type fakeSystem struct {
	host     *fakeHost
	id       string
	doc      any
	startErr error

	mu         sync.Mutex
	state      string
	procs      []*fakeProcess
	nextPid    uint32
	modified   []*schema2.ModifySettingRequest
	modifyErr  error // returned by Modify (after recording the request) when set
	stuck      bool  // Properties blocks until its context ends
	exitOnce   sync.Once
	exited     chan struct{}
	terminated int
}

func (s *fakeSystem) ID() string { return s.id }
func (s *fakeSystem) Start(context.Context) error {
	if s.startErr != nil {
		return s.startErr
	}
	s.mu.Lock()
	s.state = "Running"
	s.mu.Unlock()
	return nil
}
func (s *fakeSystem) Shutdown(ctx context.Context) error { return s.Terminate(ctx) }
func (s *fakeSystem) Terminate(context.Context) error {
	s.host.mu.Lock()
	_, exists := s.host.systems[s.id]
	delete(s.host.systems, s.id)
	s.host.mu.Unlock()
	if !exists {
		return errGone
	}
	s.mu.Lock()
	s.terminated++
	procs := append([]*fakeProcess(nil), s.procs...)
	s.mu.Unlock()
	for _, p := range procs {
		p.exit(1)
	}
	s.exitOnce.Do(func() { close(s.exited) })
	return nil
}
func (s *fakeSystem) Pause(context.Context) error  { s.set("Paused"); return nil }
func (s *fakeSystem) Resume(context.Context) error { s.set("Running"); return nil }
func (s *fakeSystem) set(st string) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}
func (s *fakeSystem) Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error) {
	s.mu.Lock()
	stuck := s.stuck
	var list []schema2.ProcessDetails
	for _, p := range s.procs {
		list = append(list, schema2.ProcessDetails{ProcessId: p.pid, ImageName: "workload.exe"})
	}
	s.mu.Unlock()
	if stuck {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &schema2.Properties{
		Id:          s.id,
		ProcessList: list,
		Statistics: &schema2.Statistics{
			Uptime100ns: 10,
			Processor:   &schema2.ProcessorStats{TotalRuntime100ns: 7},
			Memory:      &schema2.MemoryStats{MemoryUsageCommitBytes: 4096},
		},
	}, nil
}
func (s *fakeSystem) Modify(_ context.Context, r *schema2.ModifySettingRequest) error {
	s.mu.Lock()
	s.modified = append(s.modified, r)
	err := s.modifyErr
	s.mu.Unlock()
	return err
}

// hvSocketServices is the VM's HvSocket service table as its modifies made it (the entries its
// document started with aside): updated entries, less removed ones.
func (s *fakeSystem) hvSocketServices() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := map[string]bool{}
	for _, r := range s.modified {
		id, ok := strings.CutPrefix(r.ResourcePath, "VirtualMachine/Devices/HvSocket/HvSocketConfig/ServiceTable/")
		if !ok || s.modifyErr != nil {
			continue
		}
		if r.RequestType == schema2.RequestTypeRemove {
			delete(set, id)
		} else {
			set[id] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
func (s *fakeSystem) CreateProcess(_ context.Context, pp *schema2.ProcessParameters) (task.HCSProcess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextPid += 100
	p := newFakeProcess(s.nextPid, pp)
	s.procs = append(s.procs, p)
	return p, nil
}
func (s *fakeSystem) Exited() <-chan struct{} { return s.exited }
func (s *fakeSystem) ExitError() error        { return nil }
func (s *fakeSystem) Close() error            { return nil }

func (s *fakeSystem) process(i int) *fakeProcess {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.procs) {
		return nil
	}
	return s.procs[i]
}

// fakeProcess: the test plays the process, writing to stdoutW/stderrW and calling exit.
type fakeProcess struct {
	pid    uint32
	params *schema2.ProcessParameters

	stdinR           *io.PipeReader
	stdinW           *io.PipeWriter
	stdoutR, stderrR *io.PipeReader
	stdoutW, stderrW *io.PipeWriter

	mu       sync.Mutex
	signals  []schema2.ProcessSignal
	kills    int
	resizes  [][2]uint16
	code     int
	exitOnce sync.Once
	exited   chan struct{}
}

func newFakeProcess(pid uint32, pp *schema2.ProcessParameters) *fakeProcess {
	p := &fakeProcess{pid: pid, params: pp, exited: make(chan struct{})}
	p.stdinR, p.stdinW = io.Pipe()
	p.stdoutR, p.stdoutW = io.Pipe()
	p.stderrR, p.stderrW = io.Pipe()
	return p
}

// exit ends the process: its streams close (as HCS's pipes do) and it reports code.
func (p *fakeProcess) exit(code int) {
	p.exitOnce.Do(func() {
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		_ = p.stdoutW.Close()
		_ = p.stderrW.Close()
		close(p.exited)
	})
}

func (p *fakeProcess) Pid() uint32 { return p.pid }
func (p *fakeProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser) {
	var (
		in       io.WriteCloser
		out, err io.ReadCloser
	)
	if p.params.CreateStdInPipe {
		in = p.stdinW
	}
	if p.params.CreateStdOutPipe {
		out = p.stdoutR
	}
	if p.params.CreateStdErrPipe {
		err = p.stderrR
	}
	return in, out, err
}
func (p *fakeProcess) Signal(_ context.Context, o *schema2.SignalProcessOptions) (bool, error) {
	select {
	case <-p.exited:
		return false, errGone
	default:
	}
	p.mu.Lock()
	p.signals = append(p.signals, o.Signal)
	p.mu.Unlock()
	return true, nil
}
func (p *fakeProcess) Kill(context.Context) (bool, error) {
	select {
	case <-p.exited:
		return false, errGone
	default:
	}
	p.mu.Lock()
	p.kills++
	p.mu.Unlock()
	p.exit(1)
	return true, nil
}
func (p *fakeProcess) Exited() <-chan struct{} { return p.exited }
func (p *fakeProcess) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}
func (p *fakeProcess) ResizeConsole(_ context.Context, w, h uint16) error {
	p.mu.Lock()
	p.resizes = append(p.resizes, [2]uint16{w, h})
	p.mu.Unlock()
	return nil
}
func (p *fakeProcess) CloseStdin(context.Context) error { return p.stdinW.Close() }
func (p *fakeProcess) Close() error                     { return nil }

type fakeLayers struct {
	mu       sync.Mutex
	mounted  map[string]bool
	mountErr error
}

func newFakeLayers() *fakeLayers { return &fakeLayers{mounted: map[string]bool{}} }

func (l *fakeLayers) Mount(_ context.Context, c *layers.Chain) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mountErr != nil {
		return "", l.mountErr
	}
	l.mounted[c.Scratch] = true
	return c.Scratch + "/mount", nil
}

func (l *fakeLayers) Unmount(_ context.Context, scratch string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mounted, scratch)
	return nil
}

func (l *fakeLayers) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mounted)
}

type publishedEvent struct {
	topic string
	event events.Event
}

type fakePublisher struct {
	mu     sync.Mutex
	events []publishedEvent
	notify chan struct{}
}

func newFakePublisher() *fakePublisher { return &fakePublisher{notify: make(chan struct{}, 1024)} }

func (f *fakePublisher) Publish(_ context.Context, topic string, e events.Event) error {
	f.mu.Lock()
	f.events = append(f.events, publishedEvent{topic, e})
	f.mu.Unlock()
	f.notify <- struct{}{}
	return nil
}

func (f *fakePublisher) topics() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		out = append(out, e.topic)
	}
	return out
}

func (f *fakePublisher) all() []publishedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]publishedEvent(nil), f.events...)
}

// HostProcessorCount makes the fake host a processorCounter (hyperv.go): four processors.
func (h *fakeHost) HostProcessorCount(context.Context) (uint32, error) { return 4, nil }

// Container Credential Guard instances of the fake host (task.CredentialGuards), by id.
// An HvSocket instance has a service GUID made from its id (fakeServiceID).
func (h *fakeHost) AddCredentialGuard(ctx context.Context, id, credSpec, transport string) (*schema2.ContainerCredentialGuardInstance, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ccg == nil {
		h.ccg = map[string]*schema2.ContainerCredentialGuardInstance{}
	}
	if _, ok := h.ccg[id]; ok {
		return nil, errdefs.ErrAlreadyExists
	}
	in := &schema2.ContainerCredentialGuardInstance{Id: id, CredentialGuard: &schema2.ContainerCredentialGuardState{
		Cookie: "cookie-" + id, RpcEndpoint: "ep-" + id, Transport: transport, CredentialSpec: credSpec}}
	if transport == schema2.CCGTransportHvSocket {
		in.HvSocketConfig = &schema2.ContainerCredentialGuardHvSocketServiceConfig{ServiceId: fakeServiceID(id),
			ServiceConfig: &schema2.HvSocketServiceConfig{ConnectSecurityDescriptor: "D:P(A;;FA;;;SY)"}}
	}
	h.ccg[id] = in
	return in, nil
}

// fakeServiceID is the HvSocket service GUID of the fake host's instance id.
func fakeServiceID(id string) string {
	return fmt.Sprintf("%08x-0000-4000-8000-000000000000", crc32.ChecksumIEEE([]byte(id)))
}

func (h *fakeHost) RemoveCredentialGuard(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.ccg[id]; !ok {
		return errGone
	}
	delete(h.ccg, id)
	return nil
}

func (h *fakeHost) credentialGuards() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Keys(h.ccg))
}

// HostOSVersion makes the fake host an osVersioner (create.go): Windows Server 2022.
func (h *fakeHost) HostOSVersion(context.Context) (string, error) { return "10.0.20348.1", nil }
