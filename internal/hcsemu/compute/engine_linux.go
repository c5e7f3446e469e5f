package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/hns"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// Subscriber is a client connection: it holds handles on systems and processes and receives
// their events. Notify must not block (the server queues the event); the engine calls it with
// the system's lock held, which keeps each connection's events in the order things happened.
type Subscriber = dispatch.Subscriber

// networks is what compute systems ask of HNS (internal/hcsemu/hns): a container joins and
// leaves an HNS namespace, gets a namespace of its own for its NetworkAdapters, or has an
// endpoint attached by an HCS v1 request; a utility VM's NICs are endpoints; and a
// container's resolver file follows its adapters' DNS settings (dns_linux.go).
type networks interface {
	JoinContainer(nsID, system string) (netnsPath string, err error)
	LeaveContainer(nsID, system string)
	SystemNamespace(ctx context.Context, system string, endpoints []string, field func(i int) string) (id, netnsPath string, err error)
	DeleteSystemNamespace(ctx context.Context, id string)
	SystemEndpoint(ctx context.Context, nsID, system, epID string, add bool) error
	AttachVMNIC(ctx context.Context, field, vm, nic, netns, epID, mac string, index int) error
	DetachVMNIC(ctx context.Context, vm, nic, epID string)
	NamespaceDNS(nsID string) []hns.AdapterDNS
	VMDNS(vm string) []hns.AdapterDNS
}

// volumes is what compute systems ask of the storage filter (internal/hcsemu/storage): the
// folder a volume path (\\?\Volume{GUID}\, as Container.Storage.Path names it) is mounted at.
type volumes interface {
	Resolve(p string) (target string, ok bool, err error)
}

// Config configures an Engine.
type Config struct {
	// Root is the daemon's state folder (--root). It also names the daemon's cgroups.
	Root string
	// OSVersion is the emulated host build, reported by service properties.
	OSVersion string
	// ShutdownGrace is how long Shutdown waits for processes to exit after CtrlShutdown
	// before it terminates them. Zero means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// CgroupRoot is where the cgroup v1 controllers are mounted; "" means /sys/fs/cgroup.
	CgroupRoot string
	// HostMemoryMB is the emulated host's memory for utility VMs (--host-memory-mb); 0 means
	// this machine's.
	HostMemoryMB uint64
	// HostProcessors is the emulated host's logical processor count (--host-processors),
	// reported as ProcessorTopology; 0 means this machine's.
	HostProcessors int
}

// DefaultShutdownGrace is the time a system's processes get to exit after CtrlShutdown. HCS
// does not document its own; Windows gives console processes 5 seconds to handle
// CTRL_SHUTDOWN_EVENT (SetConsoleCtrlHandler), and that is what is emulated.
const DefaultShutdownGrace = 5 * time.Second

// DefaultOSVersion is Windows Server 2022's build, the default --os-version.
const DefaultOSVersion = "10.0.20348.1"

// Engine keeps the compute systems. Its lock guards only the table of systems; each system has
// its own lock, so no call ever waits on another system's processes.
type Engine struct {
	lock     *os.File // flock of <root>/hcsemu.lock
	cfg      Config
	hostCPUs int
	cg       *cgroupManager
	sp       *spawner
	hns      *hns.Service // served by its own methods (dispatch_linux.go); closed with the engine
	net      networks     // what compute systems ask of HNS: the same service
	instance atomic.Uint64
	cleanup  sync.WaitGroup
	storage  *storage.Filter            // served by its own methods (dispatch_linux.go); closed with the engine
	volumes  volumes                    // what compute systems ask of the storage filter: the same filter
	table    map[string]dispatch.Method // the wire methods served (dispatch_linux.go)
	faults   faults                     // injected by the fault methods, for tests
	vmFaults vmFaults
	vmHost   *vmHost  // the budget and folder of utility VMs (vm_linux.go)
	ccg      ccgTable // Container Credential Guard instances (ccg.go)

	mu      sync.Mutex
	systems map[string]*system
	closed  bool
}

// Config returns e's configuration, its defaults filled in and its root absolute.
func (e *Engine) Config() Config { return e.cfg }

// NewEngine prepares the cgroups and the spawner thread. The program must have called Reexec
// first (reexec_linux.go).
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if err := checkReexec(); err != nil {
		return nil, err
	}
	if cfg.OSVersion == "" {
		cfg.OSVersion = DefaultOSVersion
	}
	hostBuild, err := parseOSBuild(cfg.OSVersion)
	if err != nil {
		return nil, fmt.Errorf("hcsemu: --os-version %q: %v: %w", cfg.OSVersion, err, computecore.E_INVALIDARG)
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.Root == "" {
		return nil, fmt.Errorf("hcsemu: no root folder: %w", computecore.E_INVALIDARG)
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, err
	}
	cfg.Root = root
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create root %s: %w", root, err)
	}
	// The root holds the containers' files and the emulator's records: owner-only, also when
	// it was made before with looser permissions (MkdirAll leaves an existing folder as it is).
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("make root %s owner-only: %w", root, err)
	}
	// One daemon per root: the root names the cgroups, and a starting daemon ends whatever a
	// dead one of the same root left in them, which must never be a live daemon's systems.
	lock, err := os.OpenFile(filepath.Join(root, lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("another HCS emulator is using the root %s: %w", root, err)
	}
	// The instance is named after the root as the kernel shows the lock file (links resolved),
	// so that sweepDeadInstances recognises this daemon's folders from any other daemon.
	canonical, err := filepath.EvalSymlinks(root)
	if err != nil {
		lock.Close()
		return nil, err
	}
	instance := layout.Instance(canonical)
	sweepDeadInstances(ctx, cfg.CgroupRoot, "/proc", instance)
	// Mapped pipes' sockets a dead daemon of this root left (pipes_linux.go): system
	// instances start again from 1, and a stale socket would refuse its name.
	if err := os.RemoveAll(filepath.Join(root, pipesFolder)); err != nil {
		lock.Close()
		return nil, fmt.Errorf("remove the pipes a dead daemon left in %s: %w", root, err)
	}
	cg, err := newCgroupManager(ctx, cfg.CgroupRoot, instance)
	if err != nil {
		lock.Close()
		return nil, err
	}
	hnsSvc, err := hns.New(ctx, root, hostBuild.Build)
	if err != nil {
		cg.removeBase()
		lock.Close()
		return nil, fmt.Errorf("hcsemu: HNS: %w", err)
	}
	// Layers a dead daemon of this root attached are detached before anything is served.
	filter, err := storage.New(ctx, root)
	if err != nil {
		hnsSvc.Close(ctx)
		cg.removeBase()
		lock.Close()
		return nil, err
	}
	hostCPUs := runtime.NumCPU()
	if cfg.HostProcessors > 0 {
		hostCPUs = cfg.HostProcessors
	}
	e := &Engine{
		vmHost:   newVMHost(cfg),
		storage:  filter,
		volumes:  filter,
		lock:     lock,
		cfg:      cfg,
		hostCPUs: hostCPUs,
		cg:       cg,
		sp:       newSpawner(),
		hns:      hnsSvc,
		net:      hnsSvc,
		systems:  map[string]*system{},
	}
	e.table = e.methods()
	e.faults.served = e.table
	return e, nil
}

// system is one compute system. Everything below mu is guarded by it.
type system struct {
	e        *Engine
	id       string
	instance uint64
	typ      schema2.SystemType
	doc      *schema2.ComputeSystem
	volPath  string // Container.Storage.Path, the container's C:\
	stopped  chan struct{}

	mu        sync.Mutex
	removed   bool
	state     schema2.State
	exit      schema2.SystemExitStatus
	vol       *volume
	cg        *cgroup
	started   time.Time
	everRan   bool // a process was started: the silo now ends with its last process
	procs     map[uint32]*process
	exitOrder []uint32 // exited processes, oldest first, for pruning
	refs      map[Subscriber]int
	mapped    map[string]*mappedDir // by lower-cased container path
	// netnsID is the HNS namespace of Container.Networking.Namespace, and netns its Linux
	// network namespace, held open while the system's processes may start (nil: the daemon's).
	netnsID string
	netns   *os.File
	// ownNetns: the namespace is the emulator's, made for Container.Networking.NetworkAdapters,
	// and goes with the system.
	ownNetns bool
	// vm is the utility VM of a VirtualMachine system (vm_linux.go); host the VM a hosted
	// container runs in (hosted_linux.go). Both nil for a process-isolated container.
	vm     *vmState
	hosted *hostedLink
	// silo is a running process-isolated container's PID namespace and its procfs
	// (silo_linux.go); nil otherwise.
	silo *silo
	// pipes are a process-isolated container's mapped pipes (pipes_linux.go); nil: none.
	pipes *pipeState
	// identity is the gMSA domain of a container naming a Container Credential Guard
	// instance (ccg.go); nil: none.
	identity *domainIdentity
}

// moveLocked changes s's state as op does (state.go), or fails as transition does and changes nothing.
func (s *system) moveLocked(op systemOp) error {
	to, err := transition(s.id, s.state, op)
	if err != nil {
		return err
	}
	s.state = to
	return nil
}

func (s *system) ref() wire.SystemRef { return wire.SystemRef{ID: s.id, Instance: s.instance} }

func statDir(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("not a directory")
	}
	return nil
}

// statPath checks a folder a document names: a volume path the storage filter mounted (its
// mount point), else a path on this machine.
func (e *Engine) statPath(p string) error {
	if target, ok, err := e.volumes.Resolve(p); ok {
		if err != nil {
			return err
		}
		p = target
	}
	return statDir(p)
}

// statSource checks the host path of a mapped directory of a process-isolated container: a
// folder, or a single file. HCS maps files too: hcsshim sends every non-pipe mount of a
// process-isolated container as a MappedDirectory, files included, and resolves a file's path
// itself because "HCS has a bug where it does not correctly resolve file (not dir) paths if the
// path includes a symlink" (internal/hcsoci/hcsdoc_wcow.go createMountsConfig); kubelet's
// termination message file and the pod's hosts file reach HCS that way.
func (e *Engine) statSource(p string) error {
	if target, ok, err := e.volumes.Resolve(p); ok {
		if err != nil {
			return err
		}
		p = target
	}
	return statDirOrFile(p)
}

func statDirOrFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("neither a folder nor a file (%s)", fi.Mode().Type())
	}
	return nil
}

// CreateSystem validates doc and creates the system in state Created, held by sub. Nothing is
// left behind when it fails.
func (e *Engine) CreateSystem(ctx context.Context, id, doc string, sub Subscriber) (wire.SystemReply, error) {
	if id == "" {
		return wire.SystemReply{}, hresult.Errorf(computecore.E_INVALIDARG, "id: a compute system needs an id")
	}
	cs, err := validateComputeSystem(doc, e.hostCPUs, e.statPath, e.statSource, hostPathsOf(ctx))
	if err != nil {
		return wire.SystemReply{}, err
	}
	if err := checkPipeRelayer(cs, sub); err != nil {
		return wire.SystemReply{}, err
	}
	s := &system{
		e: e, id: id, instance: e.instance.Add(1), doc: cs, stopped: make(chan struct{}),
		procs: map[uint32]*process{}, refs: map[Subscriber]int{}, mapped: map[string]*mappedDir{},
		typ: schema2.SystemTypeContainer,
	}
	if cs.VirtualMachine != nil {
		s.typ = schema2.SystemTypeVirtualMachine
	}
	if cs.Container != nil && cs.Container.Storage != nil {
		s.volPath = cs.Container.Storage.Path
		if target, ok, err := e.volumes.Resolve(s.volPath); ok {
			if err != nil {
				return wire.SystemReply{}, hresult.Errorf(computecore.E_PATH_NOT_FOUND, "Container.Storage.Path: %q: %v", s.volPath, err)
			}
			s.volPath = target
		}
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return wire.SystemReply{}, hresult.Errorf(computecore.HCS_E_SERVICE_NOT_AVAILABLE, "the HCS emulator is shutting down")
	}
	if _, ok := e.systems[id]; ok {
		e.mu.Unlock()
		return wire.SystemReply{}, hresult.Errorf(computecore.HCS_E_SYSTEM_ALREADY_EXISTS, "a compute system with id %q already exists", id)
	}
	// Locking a mutex nobody else can have yet never blocks; holding it while the system is
	// set up makes concurrent openers of this id wait for the outcome.
	s.mu.Lock()
	defer s.mu.Unlock()
	e.systems[id] = s
	e.mu.Unlock()

	if err := s.setupLocked(ctx); err != nil {
		s.teardownLocked(ctx)
		s.removed = true
		e.mu.Lock()
		delete(e.systems, id)
		e.mu.Unlock()
		return wire.SystemReply{}, err
	}
	if err := s.moveLocked(opCreate); err != nil {
		return wire.SystemReply{}, err
	}
	s.refs[sub]++
	log.G(ctx).WithFields(log.Fields{"system": id, "type": s.typ}).Info("hcsemu: compute system created")
	return wire.SystemReply{Instance: s.instance}, nil
}

func (s *system) setupLocked(ctx context.Context) error {
	if s.doc.HostedSystem != nil {
		return s.setupHostedLocked(ctx)
	}
	cg, err := s.e.cg.create(s.id)
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "compute system %q: %v", s.id, err)
	}
	s.cg = cg
	if s.doc.VirtualMachine != nil {
		return s.setupVMLocked(ctx)
	}
	if err := s.checkProcessIsolatedBuildLocked(); err != nil {
		return err
	}
	return s.setupContainerLocked(ctx)
}

// setupContainerLocked applies a container's document: limits, network, volume, mapped
// directories. A hosted container has its cgroup and volume path from its VM already.
func (s *system) setupContainerLocked(ctx context.Context) error {
	c := s.doc.Container
	cg := s.cg
	if c == nil {
		return nil
	}
	if c.ContainerCredentialGuard != nil && s.hosted == nil {
		// A hosted container's instance was checked against its VM (attachToVM).
		id, _, err := s.e.ccg.resolve("Container.ContainerCredentialGuard", c.ContainerCredentialGuard, false)
		if err != nil {
			return err
		}
		s.identity = id
	}
	if c.Processor != nil {
		if err := cg.setProcessor(c.Processor.Count, c.Processor.Maximum, c.Processor.Weight, s.cpusLocked()); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "compute system %q: Container.Processor: %v", s.id, err)
		}
	}
	if c.Memory != nil {
		if err := cg.setMemory(c.Memory.SizeInMB); err != nil {
			return hresult.Errorf(computecore.E_INVALIDARG, "compute system %q: Container.Memory.SizeInMB: %v", s.id, err)
		}
	}
	if n := c.Networking; n != nil && n.Namespace != "" {
		path, err := s.e.net.JoinContainer(n.Namespace, s.id)
		if err != nil {
			return err
		}
		s.netnsID = n.Namespace
		if s.netns, err = os.Open(path); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "Container.Networking.Namespace: %q: %v", n.Namespace, err)
		}
	} else if n != nil && len(n.NetworkAdapters) > 0 {
		id, path, err := s.e.net.SystemNamespace(ctx, s.id, n.NetworkAdapters, func(i int) string {
			return fmt.Sprintf("Container.Networking.NetworkAdapters[%d]", i)
		})
		if err != nil {
			return err
		}
		s.netnsID, s.ownNetns = id, true
		if s.netns, err = os.Open(path); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "Container.Networking.NetworkAdapters: the container's namespace %s: %v", id, err)
		}
	}
	if s.volPath != "" {
		v, err := openVolume(s.volPath)
		if err != nil {
			return hresult.Errorf(computecore.E_PATH_NOT_FOUND, "Container.Storage.Path: %q: %v", s.volPath, err)
		}
		s.vol = v
		for i, md := range c.MappedDirectories {
			if err := s.mapLocked(md); err != nil {
				return fmt.Errorf("Container.MappedDirectories[%d]: %w", i, err)
			}
		}
		// A hosted container's pipes are the VM's, translated to their host pipes
		// (hosted_linux.go attachToVM).
		if err := s.mapPipesLocked(ctx, c.MappedPipes); err != nil {
			return err
		}
	}
	return nil
}

// teardownLocked undoes setupLocked: mounts, volume, network namespace and cgroups.
func (s *system) teardownLocked(ctx context.Context) {
	if s.vm != nil {
		s.releaseVMNetworkLocked(ctx)
	}
	s.leaveHostLocked()
	s.closePipesLocked()
	s.unmapAllLocked(ctx)
	s.leaveNetworkLocked()
	if s.vol != nil {
		s.vol.Close()
	}
	if s.cg != nil {
		s.cg.destroy(ctx)
	}
}

// lookup returns the system ref names, locked. Callers unlock it.
func (e *Engine) lookup(ref wire.SystemRef) (*system, error) {
	e.mu.Lock()
	s, ok := e.systems[ref.ID]
	e.mu.Unlock()
	if ok {
		s.mu.Lock()
		if !s.removed && (ref.Instance == 0 || ref.Instance == s.instance) {
			return s, nil
		}
		s.mu.Unlock()
	}
	return nil, hresult.Errorf(computecore.HCS_E_SYSTEM_NOT_FOUND, "compute system %q not found", ref.ID)
}

func (s *system) exitDocLocked() string {
	b, _ := json.Marshal(s.exit)
	return string(b)
}

// OpenSystem gives sub a handle on an existing system.
func (e *Engine) OpenSystem(ctx context.Context, id string, sub Subscriber) (wire.SystemReply, error) {
	s, err := e.lookup(wire.SystemRef{ID: id})
	if err != nil {
		return wire.SystemReply{}, err
	}
	defer s.mu.Unlock()
	s.refs[sub]++
	r := wire.SystemReply{Instance: s.instance}
	if s.state == schema2.StateStopped {
		r.Stopped, r.ExitStatus = true, s.exitDocLocked()
	}
	return r, nil
}

// CloseSystem drops one of sub's handles on a system. A stopped system with no handles left is
// removed, as HCS forgets a stopped compute system when its last handle closes.
func (e *Engine) CloseSystem(ctx context.Context, ref wire.SystemRef, sub Subscriber) {
	s, err := e.lookup(ref)
	if err != nil {
		return
	}
	defer s.mu.Unlock()
	if s.refs[sub]--; s.refs[sub] <= 0 {
		delete(s.refs, sub)
	}
	s.terminateIfUnheldLocked(ctx)
	s.maybeRemoveLocked()
}

// terminateIfUnheldLocked honours ShouldTerminateOnLastHandleClosed: "this system will be
// forcibly terminated when the last HCS_SYSTEM handle corresponding to it is closed" (VirtDocs
// ComputeSystem), also when the handles went with their process.
func (s *system) terminateIfUnheldLocked(ctx context.Context) {
	if len(s.refs) == 0 && s.doc.ShouldTerminateOnLastHandleClosed && s.state != "" && s.state != schema2.StateStopped && !s.removed {
		log.G(ctx).WithField("system", s.id).Info("hcsemu: last handle closed: terminating (ShouldTerminateOnLastHandleClosed)")
		s.stopLocked(ctx, schema2.NotificationForcedExit)
	}
}

// Forget drops every handle sub holds: its connection is gone. Systems keep running.
func (e *Engine) Forget(ctx context.Context, sub Subscriber) {
	for _, s := range e.snapshot() {
		s.mu.Lock()
		delete(s.refs, sub)
		for _, p := range s.procs {
			delete(p.refs, sub)
		}
		s.pruneLocked()
		s.terminateIfUnheldLocked(ctx)
		s.maybeRemoveLocked()
		s.mu.Unlock()
	}
}

func (e *Engine) snapshot() []*system {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*system, 0, len(e.systems))
	for _, s := range e.systems {
		out = append(out, s)
	}
	return out
}

func (s *system) maybeRemoveLocked() {
	if s.removed || s.state != schema2.StateStopped || len(s.refs) > 0 {
		return
	}
	s.removed = true
	s.e.mu.Lock()
	if s.e.systems[s.id] == s {
		delete(s.e.systems, s.id)
	}
	s.e.mu.Unlock()
	log.L.WithField("system", s.id).Debug("hcsemu: compute system removed")
}

// notifyLocked sends ev to every connection holding the system.
func (s *system) notifyLocked(ev wire.Event) {
	for sub := range s.refs {
		sub.Notify(ev)
	}
}

// stopLocked moves the system to Stopped: every process still in its cgroups is killed, its
// mapped directories unmounted, its holders told; the cgroups are removed once empty.
func (s *system) stopLocked(ctx context.Context, exitType schema2.NotificationType) {
	if err := s.moveLocked(opExit); err != nil {
		return // stopped already
	}
	s.exit = schema2.SystemExitStatus{Status: 0, ExitType: exitType}
	if s.vm != nil || s.hosted != nil {
		s.exit.Status = vmExitStatus(exitType)
	}
	close(s.stopped)
	if s.vm != nil {
		s.stopVMLocked(ctx, exitType)
	}
	s.leaveHostLocked()
	if s.cg != nil {
		s.cg.kill(ctx)
	}
	s.stopSiloLocked(ctx)
	s.closePipesLocked()
	s.unmapAllLocked(ctx)
	s.leaveNetworkLocked()
	s.notifyLocked(wire.Event{Type: computecore.EventSystemExited, System: s.ref(), Data: s.exitDocLocked()})
	log.G(ctx).WithFields(log.Fields{"system": s.id, "exitType": exitType}).Info("hcsemu: compute system stopped")

	procs := make([]*process, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	vol, cg := s.vol, s.cg
	s.e.cleanup.Add(1)
	go func() {
		defer s.e.cleanup.Done()
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(10 * time.Second):
			}
		}
		if vol != nil {
			vol.Close()
		}
		if cg != nil {
			cg.destroy(context.WithoutCancel(ctx))
		}
	}()
	s.maybeRemoveLocked()
}

// leaveNetworkLocked takes the system out of its HNS namespace: no process of it starts any
// more. Processes still exiting keep the Linux namespace alive until they are gone.
func (s *system) leaveNetworkLocked() {
	if s.netnsID != "" && s.ownNetns {
		s.e.net.DeleteSystemNamespace(context.Background(), s.netnsID)
	} else if s.netnsID != "" {
		s.e.net.LeaveContainer(s.netnsID, s.id)
	}
	s.netnsID, s.ownNetns = "", false
	if s.netns != nil {
		s.netns.Close()
		s.netns = nil
	}
}

// liveLocked lists the processes that have not exited.
func (s *system) liveLocked() []*process {
	var out []*process
	for _, p := range s.procs {
		select {
		case <-p.exited:
		default:
			out = append(out, p)
		}
	}
	return out
}

// Start starts a created system.
func (e *Engine) Start(ctx context.Context, ref wire.SystemRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "start options"); err != nil {
		return err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	if s.vm != nil {
		// An injected slow boot (fault_vm_linux.go) is waited out without the VM's lock.
		if d := e.vmFaults.bootDelay(s.id); d > 0 && s.state == schema2.StateCreated {
			s.mu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return hresult.Errorf(computecore.E_CANCELLED, "start of VM %q: cancelled during an injected boot delay: %v", ref.ID, ctx.Err())
			}
			if s, err = e.lookup(ref); err != nil {
				return err
			}
		}
	}
	defer s.mu.Unlock()
	if _, err := transition(s.id, s.state, opStart); err != nil {
		return err
	}
	if s.vm == nil && s.state == schema2.StateCreated {
		// Before the silo, so a failure leaves the container as it was.
		if err := s.writeResolvConfLocked(); err != nil {
			return err
		}
	}
	if s.vm != nil {
		if err := s.startVMLocked(ctx); err != nil {
			return err
		}
	} else if s.hosted == nil && s.vol != nil {
		if err := s.startSiloLocked(ctx); err != nil {
			return err
		}
	}
	if err := s.moveLocked(opStart); err != nil {
		return err
	}
	s.started = time.Now()
	log.G(ctx).WithField("system", s.id).Info("hcsemu: compute system started")
	return nil
}

// Pause freezes a running system.
func (e *Engine) Pause(ctx context.Context, ref wire.SystemRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "pause options"); err != nil {
		return err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := transition(s.id, s.state, opPause); err != nil {
		return err
	}
	if err := s.cg.freeze(ctx); err != nil {
		s.cg.thaw(context.WithoutCancel(ctx))
		return hresult.Errorf(computecore.E_FAIL, "pause compute system %q: %v", s.id, err)
	}
	return s.moveLocked(opPause)
}

// Resume thaws a paused system.
func (e *Engine) Resume(ctx context.Context, ref wire.SystemRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "resume options"); err != nil {
		return err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := transition(s.id, s.state, opResume); err != nil {
		return err
	}
	if err := s.cg.thaw(ctx); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "resume compute system %q: %v", s.id, err)
	}
	return s.moveLocked(opResume)
}

// Terminate stops a system at once, killing its processes.
func (e *Engine) Terminate(ctx context.Context, ref wire.SystemRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "terminate options"); err != nil {
		return err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := transition(s.id, s.state, opTerminate); err != nil {
		return err
	}
	s.stopLocked(ctx, schema2.NotificationForcedExit)
	return nil
}

// Shutdown sends CtrlShutdown to every process of the system, waits up to the grace period
// for the system to stop (a container stops with its last process), then terminates it.
func (e *Engine) Shutdown(ctx context.Context, ref wire.SystemRef, options string) error {
	var opts map[string]any
	if err := hresult.DecodeOptional(options, &opts, "shutdown options"); err != nil {
		return err
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	if _, err := transition(s.id, s.state, opShutdown); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.vm != nil {
		// The guest shuts itself down; what runs in it ends with it.
		s.stopLocked(ctx, schema2.NotificationGracefulExit)
		s.mu.Unlock()
		return nil
	}
	live := s.liveLocked()
	if len(live) == 0 {
		s.stopLocked(ctx, schema2.NotificationGracefulExit)
		s.mu.Unlock()
		return nil
	}
	for _, p := range live {
		p.signalLocked(signalFor(schema2.SignalCtrlShutdown))
	}
	stopped := s.stopped
	s.mu.Unlock()

	t := time.NewTimer(e.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return hresult.Errorf(computecore.E_CANCELLED, "shutdown of compute system %q: %v", s.id, ctx.Err())
	case <-t.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	log.G(ctx).WithField("system", s.id).Info("hcsemu: processes did not exit after CtrlShutdown; terminating")
	s.stopLocked(ctx, schema2.NotificationForcedExit)
	return nil
}

// basicLocked is the always-present part of Properties.
func (s *system) basicLocked() schema2.Properties {
	p := schema2.Properties{
		Id:              s.id,
		SystemType:      s.typ,
		RuntimeOsType:   "Windows",
		Owner:           s.doc.Owner,
		State:           s.state,
		Stopped:         s.state == schema2.StateStopped,
		HostingSystemId: s.doc.HostingSystemId,
		// RuntimeId is the system's GUID (a VM's is what hcsshim caches after create); stable
		// for this incarnation of the id.
		RuntimeId: s.runtimeID(),
	}
	if p.Stopped {
		p.ExitType = s.exit.ExitType
	}
	return p
}

// Properties answers a PropertyQuery: the basic properties, plus Statistics and ProcessList
// from the system's cgroups when asked.
func (e *Engine) Properties(ctx context.Context, ref wire.SystemRef, query string) (string, error) {
	var q schema2.PropertyQuery
	if err := hresult.DecodeOptional(query, &q, "PropertyQuery"); err != nil {
		return "", err
	}
	for i, t := range q.PropertyTypes {
		if !knownSystemProperty(t) {
			return "", hresult.Errorf(computecore.E_INVALIDARG, "PropertyTypes[%d]: %q is not a property type", i, t)
		}
	}
	s, err := e.lookup(ref)
	if err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	props := s.basicLocked()
	if s.vm != nil {
		s.vmPropertiesLocked(&props, q.PropertyTypes)
	}
	for _, t := range q.PropertyTypes {
		switch t {
		case schema2.PropertyTypeStatistics:
			props.Statistics = s.statisticsLocked()
		case schema2.PropertyTypeProcessList:
			props.ProcessList = s.processListLocked()
		case schema2.PropertyTypeSystemGUID:
			props.SystemGUID = s.runtimeID()
		}
	}
	b, err := json.Marshal(props)
	return string(b), err
}

func knownSystemProperty(t schema2.PropertyType) bool {
	switch t {
	case schema2.PropertyTypeMemory, schema2.PropertyTypeGuestMemory, schema2.PropertyTypeStatistics,
		schema2.PropertyTypeProcessList, schema2.PropertyTypeTerminateOnLastHandleClosed,
		schema2.PropertyTypeSharedMemoryRegion, schema2.PropertyTypeGuestConnection,
		schema2.PropertyTypeICHeartbeatStatus, schema2.PropertyTypeProcessorTopology,
		schema2.PropertyTypeCPUGroup, schema2.PropertyTypeSystemGUID:
		return true
	}
	return false
}

func (s *system) statisticsLocked() *schema2.Statistics {
	now := time.Now()
	st := &schema2.Statistics{Timestamp: now, ContainerStartTime: s.started}
	if !s.started.IsZero() {
		st.Uptime100ns = uint64(now.Sub(s.started) / 100)
	}
	var c cgroupStats
	if s.cg != nil && s.state != schema2.StateStopped {
		c = s.cg.stats()
	}
	st.Processor = &schema2.ProcessorStats{TotalRuntime100ns: c.Total100ns, RuntimeUser100ns: c.User100ns, RuntimeKernel100ns: c.Kernel100ns}
	st.Memory = &schema2.MemoryStats{MemoryUsageCommitBytes: c.MemUsage, MemoryUsageCommitPeakBytes: c.MemPeak, MemoryUsagePrivateWorkingSetBytes: c.MemPrivate}
	st.Storage = &schema2.StorageStats{ReadCountNormalized: c.ReadOps, ReadSizeBytes: c.ReadBytes, WriteCountNormalized: c.WriteOps, WriteSizeBytes: c.Wrote}
	return st
}

// Enumerate answers HcsEnumerateComputeSystems: the basic properties of every system the
// SystemQuery matches, as a JSON array.
func (e *Engine) Enumerate(ctx context.Context, query string) (string, error) {
	var q schema2.SystemQuery
	if err := hresult.DecodeOptional(query, &q, "SystemQuery"); err != nil {
		return "", err
	}
	out := []schema2.Properties{}
	for _, s := range e.snapshot() {
		s.mu.Lock()
		if !s.removed && s.state != "" {
			p := s.basicLocked()
			if matchQuery(&q, &p) {
				out = append(out, p)
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b schema2.Properties) int {
		switch {
		case a.Id < b.Id:
			return -1
		case a.Id > b.Id:
			return 1
		}
		return 0
	})
	b, err := json.Marshal(out)
	return string(b), err
}

func matchQuery(q *schema2.SystemQuery, p *schema2.Properties) bool {
	if len(q.Ids) > 0 && !slices.Contains(q.Ids, p.Id) {
		return false
	}
	if len(q.Names) > 0 && !slices.Contains(q.Names, p.Name) && !slices.Contains(q.Names, p.Id) {
		return false
	}
	if len(q.Types) > 0 && !slices.Contains(q.Types, p.SystemType) {
		return false
	}
	if len(q.Owners) > 0 && !slices.Contains(q.Owners, p.Owner) {
		return false
	}
	return true
}

// Modify applies a ModifySettingRequest: processor and memory limits (Update) and mapped
// directories (Add, Remove) of a container. A schema 1 request goes to modifyV1
// (hcsv1_linux.go).
func (e *Engine) Modify(ctx context.Context, ref wire.SystemRef, doc string) error {
	if isV1ModifyRequest(doc) {
		return e.modifyV1(ctx, ref, doc)
	}
	var req schema2.ModifySettingRequest
	if err := hresult.Decode(doc, &req, "ModifySettingRequest"); err != nil {
		return err
	}
	settings, err := json.Marshal(req.Settings)
	if err != nil {
		return hresult.Errorf(computecore.HCS_E_INVALID_JSON, "Settings: %v", err)
	}
	s, err := e.lookup(ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.state == schema2.StateStopped {
		return hresult.Errorf(computecore.HCS_E_INVALID_STATE, "modify compute system %q: it has stopped", s.id)
	}
	if s.vm != nil {
		return s.modifyVMLocked(ctx, &req)
	}
	if s.doc.Container == nil {
		return hresult.Errorf(computecore.E_NOT_SUPPORTED, "ResourcePath: %q: the emulator modifies containers only", req.ResourcePath)
	}
	if req.GuestRequest != nil {
		// Assumption: a guest request goes to a utility VM's guest; a container has none.
		return hresult.Errorf(computecore.E_INVALIDARG, "GuestRequest: compute system %q is not a utility VM", s.id)
	}
	wantType := func(types ...schema2.RequestType) error {
		if slices.Contains(types, req.RequestType) {
			return nil
		}
		return hresult.Errorf(computecore.E_INVALIDARG, "RequestType: %q is not valid for ResourcePath %q", req.RequestType, req.ResourcePath)
	}
	switch req.ResourcePath {
	case schema2.ResourcePathContainerProcessor:
		if err := wantType(schema2.RequestTypeUpdate); err != nil {
			return err
		}
		var p schema2.Processor
		if err := hresult.Decode(string(settings), &p, "Settings"); err != nil {
			return err
		}
		if err := ValidateProcessor("Settings", &p, e.hostCPUs); err != nil {
			return err
		}
		if err := s.cg.setProcessor(p.Count, p.Maximum, p.Weight, e.hostCPUs); err != nil {
			return hresult.Errorf(computecore.E_FAIL, "compute system %q: %v", s.id, err)
		}
		s.doc.Container.Processor = &p
	case schema2.ResourcePathContainerMemory:
		if err := wantType(schema2.RequestTypeUpdate); err != nil {
			return err
		}
		var mb uint64
		if err := hresult.Decode(string(settings), &mb, "Settings"); err != nil {
			return err
		}
		if err := s.cg.setMemory(mb); err != nil {
			// The kernel refuses a limit below what the group already uses.
			return hresult.Errorf(computecore.E_INVALIDARG, "Settings: memory limit of %d MiB for compute system %q: %v", mb, s.id, err)
		}
		s.doc.Container.Memory = &schema2.Memory{SizeInMB: mb}
	case schema2.ResourcePathContainerMappedPipes:
		// A host pipe mapped while the container runs (pipes_linux.go).
		if err := wantType(schema2.RequestTypeAdd, schema2.RequestTypeRemove); err != nil {
			return err
		}
		var mp schema2.MappedPipe
		if err := hresult.Decode(string(settings), &mp, "Settings"); err != nil {
			return err
		}
		if s.hosted != nil {
			return hresult.Errorf(computecore.E_NOTIMPL, "ResourcePath: %q: pipes of a container in a utility VM are the VM's (VirtualMachine/Devices/MappedPipes) and named in its document; the emulator does not add them later", req.ResourcePath)
		}
		if req.RequestType == schema2.RequestTypeRemove {
			return s.removePipeLocked(mp)
		}
		if err := ValidateMappedPipe("Settings", &mp); err != nil {
			return err
		}
		return s.addPipeLocked(ctx, mp)
	case schema2.ResourcePathContainerMappedDirectories:
		if err := wantType(schema2.RequestTypeAdd, schema2.RequestTypeRemove); err != nil {
			return err
		}
		var md schema2.MappedDirectory
		if err := hresult.Decode(string(settings), &md, "Settings"); err != nil {
			return err
		}
		if s.vol == nil {
			return hresult.Errorf(computecore.E_NOT_SUPPORTED, "compute system %q has no storage to map directories into", s.id)
		}
		if req.RequestType == schema2.RequestTypeAdd {
			if s.hosted != nil {
				// In a VM the host path is the VM's (a VSMB share or a guest path).
				return s.mapHostedLocked(md)
			}
			if err := hostPathsOf(ctx).resolveIn("Settings.HostPath", &md.HostPath); err != nil {
				return err
			}
			if err := ValidateMappedDirectory("Settings", &md, statDirOrFile); err != nil {
				return err
			}
			return s.mapLocked(md)
		}
		return s.unmapLocked(ctx, md.ContainerPath)
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "ResourcePath: %q is not supported by the emulator", req.ResourcePath)
	}
	return nil
}

// ServiceProperties answers HcsGetServiceProperties. Only "Basic" is known; an empty query
// means Basic.
func (e *Engine) ServiceProperties(ctx context.Context, query string) (string, error) {
	var q schema2.PropertyQuery
	if err := hresult.DecodeOptional(query, &q, "PropertyQuery"); err != nil {
		return "", err
	}
	if len(q.PropertyTypes) == 0 {
		q.PropertyTypes = []schema2.PropertyType{schema2.PropertyTypeBasic}
	}
	var sp schema2.ServiceProperties
	for i, t := range q.PropertyTypes {
		if t == schema2.ServicePropertyTypeContainerCredentialGuard {
			b, err := json.Marshal(e.ccg.info())
			if err != nil {
				return "", err
			}
			sp.Properties = append(sp.Properties, b)
			continue
		}
		if t == schema2.ServicePropertyTypeProcessorTopology {
			b, err := json.Marshal(e.processorTopology())
			if err != nil {
				return "", err
			}
			sp.Properties = append(sp.Properties, b)
			continue
		}
		if t != schema2.PropertyTypeBasic {
			return "", hresult.Errorf(computecore.E_INVALIDARG, "PropertyTypes[%d]: %q is not a service property type", i, t)
		}
		b, err := json.Marshal(schema2.BasicInformation{
			// Windows Server 2022 accepts schema 2.0 through 2.5 (hcsshim's osversion
			// checks); the emulator accepts any 2.x.
			SupportedSchemaVersions: []schema2.Version{{Major: 2, Minor: 0}, {Major: 2, Minor: 1}, {Major: 2, Minor: 2},
				{Major: 2, Minor: 3}, {Major: 2, Minor: 4}, {Major: 2, Minor: 5}},
			OsVersion: e.cfg.OSVersion,
		})
		if err != nil {
			return "", err
		}
		sp.Properties = append(sp.Properties, b)
	}
	b, err := json.Marshal(sp)
	return string(b), err
}

// ModifyServiceSettings answers HcsModifyServiceSettings. Only PropertyType
// "ContainerCredentialGuard" is emulated; the host settings Microsoft's reference lists besides
// it (Memory, CpuGroup, cache allocation) are E_NOTIMPL here.
func (e *Engine) ModifyServiceSettings(ctx context.Context, doc string) error {
	var req struct {
		PropertyType schema2.PropertyType `json:"PropertyType"`
		Settings     json.RawMessage      `json:"Settings"`
	}
	if err := hresult.Decode(doc, &req, "ModificationRequest"); err != nil {
		return err
	}
	switch req.PropertyType {
	case schema2.ServicePropertyTypeContainerCredentialGuard:
		if err := e.ccg.modify(req.Settings); err != nil {
			return err
		}
		log.G(ctx).WithField("settings", string(req.Settings)).Info("hcsemu: Container Credential Guard modified")
		return nil
	case "Memory", "CpuGroup", "CacheAllocation", "CacheMonitoring", "MemoryBwAllocation":
		return hresult.Errorf(computecore.E_NOTIMPL, "PropertyType=%q: not emulated", req.PropertyType)
	default:
		return hresult.Errorf(computecore.E_INVALIDARG, "PropertyType=%q: not a service setting", req.PropertyType)
	}
}

// Close terminates every system (killing its processes), waits for their cgroups to be removed
// and removes the daemon's own group folders.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	for _, s := range e.snapshot() {
		s.mu.Lock()
		if !s.removed && s.state != "" {
			s.stopLocked(ctx, schema2.NotificationForcedExit)
		}
		s.mu.Unlock()
	}
	e.cleanup.Wait()
	e.vmHost.close()
	var errs []error
	if err := e.storage.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.hns.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("HNS: %w", err))
	}
	if err := e.cg.removeBase(); err != nil {
		errs = append(errs, err)
	}
	e.lock.Close()
	return errors.Join(errs...)
}
