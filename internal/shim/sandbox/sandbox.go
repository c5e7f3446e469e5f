package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/protocols/stats"
)

// Config is what CreateSandbox gives a sandbox.
type Config struct {
	// ID is the sandbox id (CreateSandboxRequest.sandbox_id), also the pod's
	// io.kubernetes.cri.sandbox-id.
	ID string
	// Bundle is the sandbox's bundle folder (bundle_path), where its state is recorded.
	Bundle string
	// Kind names the pod kind in the bundle state (KindProcess), for the delete action.
	Kind string
	// NetNS is the pod's HNS namespace (netns_path), "" for a pod on the host's network.
	NetNS string
	// Pod is what the sandbox runs.
	Pod Pod
}

// Status is what SandboxStatus reports.
type Status struct {
	ID, State, NetNS, Kind string
	Pid                    uint32
	CreatedAt, ExitedAt    time.Time
}

// Sandbox is one pod sandbox. Its methods are safe for concurrent use; none holds its lock
// across a call into the pod.
type Sandbox struct {
	id, bundle, kind, netns string
	pod                     Pod
	createdAt               time.Time
	done                    chan struct{} // closed once the pod has ended (stopped)

	mu         sync.Mutex
	state      sbState
	pid        uint32
	exitedAt   time.Time
	exitStatus uint32
	ended      bool // done is closed
}

// Create records the sandbox in its bundle (so that the delete action finds it even if the
// shim is killed right after) and returns it created. Nothing runs yet: that is Start.
func Create(_ context.Context, c Config) (*Sandbox, error) {
	if c.ID == "" {
		return nil, fmt.Errorf("sandbox_id: empty: %w", errdefs.ErrInvalidArgument)
	}
	if c.Bundle == "" || !filepath.IsAbs(c.Bundle) {
		return nil, fmt.Errorf("sandbox %s: bundle_path %q: want an absolute path: %w", c.ID, c.Bundle, errdefs.ErrInvalidArgument)
	}
	if c.Pod == nil {
		return nil, fmt.Errorf("sandbox %s: no pod to run: %w", c.ID, errdefs.ErrInvalidArgument)
	}
	s := &Sandbox{
		id: c.ID, bundle: c.Bundle, kind: c.Kind, netns: c.NetNS, pod: c.Pod,
		createdAt: time.Now().UTC(), done: make(chan struct{}), state: createdState{},
	}
	if err := writeState(c.Bundle, &bundleState{ID: c.ID, Kind: c.Kind, NetNS: c.NetNS, CreatedAt: s.createdAt}); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", c.ID, err)
	}
	return s, nil
}

// ID is the sandbox's id.
func (s *Sandbox) ID() string { return s.id }

// transition commits the next state op gives, under the lock.
func (s *Sandbox) transition(op func(sbState) (sbState, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := op(s.state)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	s.state = next
	return nil
}

// recordExit notes the pod's end once; the caller holds mu.
func (s *Sandbox) recordExit(status uint32) {
	if s.ended {
		return
	}
	s.ended = true
	s.exitStatus = status
	s.exitedAt = time.Now().UTC()
	close(s.done)
}

// Start starts the pod and makes the sandbox ready. It returns the pod's pid and the time the
// sandbox was created (StartSandboxResponse).
func (s *Sandbox) Start(ctx context.Context) (pid uint32, createdAt time.Time, _ error) {
	if err := s.transition(sbState.start); err != nil {
		return 0, time.Time{}, err
	}
	pid, err := s.pod.Start(ctx)
	if err == nil {
		// The pid is for the delete action's report, as a task records its init pid.
		err = recordPid(s.bundle, pid)
		if err != nil {
			_ = s.pod.Stop(context.WithoutCancel(ctx))
		}
	}
	if err != nil {
		if terr := s.transition(sbState.startFailed); terr != nil {
			return 0, time.Time{}, fmt.Errorf("start sandbox %s: %w (and %v)", s.id, err, terr)
		}
		return 0, time.Time{}, fmt.Errorf("start sandbox %s: %w", s.id, err)
	}
	go s.watch()
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := s.state.started()
	if err != nil {
		// The pod ended while it was being started (watch recorded it).
		return 0, time.Time{}, fmt.Errorf("start sandbox %s: its pod ended while starting (exit status %d): %w", s.id, s.exitStatus, errdefs.ErrFailedPrecondition)
	}
	s.state = next
	s.pid = pid
	return pid, s.createdAt, nil
}

// watch records the end of a started pod, whether Stop ended it or it ended by itself.
func (s *Sandbox) watch() {
	<-s.pod.Exited()
	status := s.pod.ExitStatus()
	s.mu.Lock()
	defer s.mu.Unlock()
	if next, err := s.state.exited(); err == nil {
		s.state = next
		s.recordExit(status)
	}
}

// Stop stops the pod and waits until it has ended. Stopping a stopped sandbox, or one that
// never started, is no error. ctx bounds the wait (StopSandboxRequest.timeout_secs, when
// containerd sets it).
func (s *Sandbox) Stop(ctx context.Context) error {
	s.mu.Lock()
	next, run, err := s.state.stop()
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	s.state = next
	if next.ended() {
		// Never started: nothing to stop or watch.
		s.recordExit(0)
	}
	s.mu.Unlock()
	if run {
		if err := s.pod.Stop(ctx); err != nil {
			if terr := s.transition(sbState.stopFailed); terr != nil {
				return fmt.Errorf("stop sandbox %s: %w (and %v)", s.id, err, terr)
			}
			return fmt.Errorf("stop sandbox %s: %w", s.id, err)
		}
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop sandbox %s: waiting for its pod to end: %w", s.id, ctx.Err())
	}
}

// Wait returns the pod's exit status and time once the sandbox is stopped, however it got
// there (Stop, Shutdown, or the pod ending by itself), or ctx's error.
func (s *Sandbox) Wait(ctx context.Context) (status uint32, exitedAt time.Time, _ error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return 0, time.Time{}, fmt.Errorf("wait for sandbox %s: %w", s.id, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitStatus, s.exitedAt, nil
}

// Shutdown stops the sandbox if it must, releases what its pod holds and removes its state
// from the bundle. A failed Shutdown leaves the sandbox stopped, and can be repeated.
func (s *Sandbox) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	must := s.state.mustStop()
	s.mu.Unlock()
	if must {
		if err := s.Stop(ctx); err != nil {
			return fmt.Errorf("shut down: %w", err)
		}
	}
	// Checked, not committed: the release comes first, so a failed one can be retried.
	s.mu.Lock()
	_, err := s.state.shutdown()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	if err := s.pod.Release(ctx); err != nil {
		return fmt.Errorf("shut down sandbox %s: release its pod: %w", s.id, err)
	}
	if err := removeState(s.bundle); err != nil {
		return fmt.Errorf("shut down sandbox %s: %w", s.id, err)
	}
	return s.transition(sbState.shutdown)
}

// Status answers SandboxStatus.
func (s *Sandbox) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{
		ID: s.id, State: s.state.Status(), NetNS: s.netns, Kind: s.kind,
		Pid: s.pid, CreatedAt: s.createdAt, ExitedAt: s.exitedAt,
	}
}

// Ping answers PingSandbox: nil while the sandbox is ready.
func (s *Sandbox) Ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.state.ping(); err != nil {
		return fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	return nil
}

// Join says whether a container may join the sandbox now (only a ready one takes them).
func (s *Sandbox) Join(containerID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.state.canJoin(); err != nil {
		return fmt.Errorf("task %s in sandbox %s: %w", containerID, s.id, err)
	}
	return nil
}

// Metrics returns the pod's own statistics (SandboxMetrics, and the task Stats containerd's
// Windows CRI asks of the sandbox id).
func (s *Sandbox) Metrics(ctx context.Context) (*stats.Statistics, error) {
	s.mu.Lock()
	err := s.state.canMeasure()
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", s.id, err)
	}
	st, err := s.pod.Statistics(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: statistics: %w", s.id, err)
	}
	return st, nil
}
