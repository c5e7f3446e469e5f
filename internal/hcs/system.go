package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// orphanTimeout bounds the clean-up of a system or process whose creating call was abandoned
// (its context ended) but which HCS created anyway.
const orphanTimeout = 30 * time.Second

// System is an open handle on a compute system (a container or a utility VM). It is safe for
// concurrent use. Closing it releases the handle only; the system keeps running in HCS.
type System struct {
	client *Client
	api    computecore.API // client's API when the system was opened
	id     string

	mu     sync.RWMutex // guards handle against Close; held only across the issuing call
	handle computecore.System
	// released is set once the handle is closed: notifications that computecore delivers
	// later are dropped.
	released atomic.Bool

	exitOnce sync.Once
	exited   chan struct{}
	exitErr  error

	procMu sync.Mutex
	procs  map[*Process]struct{} // processes opened through this handle, told when it exits
}

func newSystem(client *Client, api computecore.API, id string, h computecore.System) *System {
	return &System{client: client, api: api, id: id, handle: h, exited: make(chan struct{}), procs: map[*Process]struct{}{}}
}

// CreateComputeSystem creates the compute system id from document (a *schema2.ComputeSystem, or
// a JSON string/[]byte). The system is created, not started.
func (c *Client) CreateComputeSystem(ctx context.Context, id string, document any) (*System, error) {
	const opName = "CreateComputeSystem"
	api, err := c.apiFor(opName, id)
	if err != nil {
		return nil, err
	}
	doc, err := marshal(document)
	if err != nil {
		return nil, &Error{Op: opName, ID: id, Err: fmt.Errorf("encode document: %w: %w", err, errdefs.ErrInvalidArgument)}
	}
	var h computecore.System
	cl := &call{client: c, api: api, op: opName, id: id,
		start: func(op computecore.Operation) error {
			var err error
			h, err = api.CreateComputeSystem(id, doc, op, 0)
			return err
		},
		abandon: func(_ computecore.ProcessInformation, err error) {
			if err != nil {
				api.CloseComputeSystem(h)
				return
			}
			// The caller gave up, so it will neither use nor delete this system: remove it,
			// as a failed create would have.
			ctx, cancel := context.WithTimeout(context.Background(), orphanTimeout)
			defer cancel()
			s := newSystem(c, api, id, h)
			if err := s.Terminate(ctx); err != nil {
				log.G(ctx).WithField("system", id).WithError(err).Warn("terminate abandoned compute system")
			}
			_ = s.Close()
		},
	}
	if _, _, err := cl.run(ctx); err != nil {
		if h != 0 && !isCtxErr(err) {
			api.CloseComputeSystem(h)
		}
		return nil, err
	}
	s := newSystem(c, api, id, h)
	s.subscribe(ctx)
	return s, nil
}

// OpenComputeSystem opens the existing compute system id (created by this or another process).
func (c *Client) OpenComputeSystem(ctx context.Context, id string) (*System, error) {
	const opName = "OpenComputeSystem"
	api, err := c.apiFor(opName, id)
	if err != nil {
		return nil, err
	}
	h, err := bounded(ctx, opName, id, func() (computecore.System, error) {
		return api.OpenComputeSystem(id, computecore.GenericAll)
	}, api.CloseComputeSystem)
	if err != nil {
		c.dropIfDisconnected(api, err)
		return nil, asError(err, opName, id, 0)
	}
	s := newSystem(c, api, id, h)
	s.subscribe(ctx)
	// A system that stopped before the callback was set sends no more notifications.
	if props, err := s.Properties(ctx); err == nil && (props.Stopped || props.State == schema2.StateStopped) {
		s.markExited(exitStatusError(id, schema2.SystemExitStatus{ExitType: props.ExitType}))
	}
	return s, nil
}

// EnumerateComputeSystems lists the compute systems that match q (all of them when q is nil).
func (c *Client) EnumerateComputeSystems(ctx context.Context, q *schema2.SystemQuery) ([]schema2.Properties, error) {
	const opName = "EnumerateComputeSystems"
	api, err := c.apiFor(opName, "")
	if err != nil {
		return nil, err
	}
	if q == nil {
		q = &schema2.SystemQuery{}
	}
	query, _ := marshal(q)
	cl := &call{client: c, api: api, op: opName, start: func(op computecore.Operation) error {
		return api.EnumerateComputeSystems(query, op)
	}}
	doc, _, err := cl.run(ctx)
	if err != nil {
		return nil, err
	}
	var out []schema2.Properties
	if doc == "" {
		return out, nil
	}
	if err := cl.unmarshal(doc, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// HostOSVersion returns the host's Windows build, "major.minor.build.revision" (for example
// "10.0.20348.1"), from the service properties (the emulator's --os-version), or on Windows,
// when HCS does not say, from Windows itself.
func (c *Client) HostOSVersion(ctx context.Context) (string, error) {
	sp, _, err := c.serviceProperties(ctx, schema2.PropertyTypeBasic)
	if err != nil {
		return "", err
	}
	for _, raw := range sp.Properties {
		var bi schema2.BasicInformation
		if json.Unmarshal(raw, &bi) == nil && bi.OsVersion != "" {
			return bi.OsVersion, nil
		}
	}
	v, err := hostOSVersionFromOS()
	if err != nil {
		return "", &Error{Op: "GetServiceProperties", Err: fmt.Errorf("service properties carry no OS version: %w", err)}
	}
	return v, nil
}

// ID returns the compute system's id.
func (s *System) ID() string { return s.id }

// acquire returns the handle, held open (against Close) until release is called.
func (s *System) acquire() (h computecore.System, release func(), err error) {
	s.mu.RLock()
	if s.handle == 0 {
		s.mu.RUnlock()
		return 0, nil, ErrClosed
	}
	return s.handle, s.mu.RUnlock, nil
}

// systemOp runs one of the HcsXxxComputeSystem(cs, op, doc) calls on s.
func (s *System) systemOp(ctx context.Context, opName string, f func(computecore.System, computecore.Operation) error) (string, error) {
	c := &call{client: s.client, api: s.api, op: opName, id: s.id, start: func(op computecore.Operation) error {
		h, release, err := s.acquire()
		if err != nil {
			return err
		}
		defer release()
		return f(h, op)
	}}
	doc, _, err := c.run(ctx)
	return doc, err
}

// Start starts the system (Created → Running).
func (s *System) Start(ctx context.Context) error {
	_, err := s.systemOp(ctx, "StartComputeSystem", func(h computecore.System, op computecore.Operation) error {
		return s.api.StartComputeSystem(h, op, "")
	})
	return err
}

// Shutdown asks the system to shut down cleanly; it returns when HCS has accepted and finished
// the request. Exited is closed when the system has stopped.
func (s *System) Shutdown(ctx context.Context) error {
	_, err := s.systemOp(ctx, "ShutDownComputeSystem", func(h computecore.System, op computecore.Operation) error {
		return s.api.ShutDownComputeSystem(h, op, "")
	})
	return err
}

// Terminate stops the system forcibly.
func (s *System) Terminate(ctx context.Context) error {
	_, err := s.systemOp(ctx, "TerminateComputeSystem", func(h computecore.System, op computecore.Operation) error {
		return s.api.TerminateComputeSystem(h, op, "")
	})
	return err
}

// Pause freezes the system (Running → Paused).
func (s *System) Pause(ctx context.Context) error {
	_, err := s.systemOp(ctx, "PauseComputeSystem", func(h computecore.System, op computecore.Operation) error {
		return s.api.PauseComputeSystem(h, op, "")
	})
	return err
}

// Resume thaws a paused system (Paused → Running).
func (s *System) Resume(ctx context.Context) error {
	_, err := s.systemOp(ctx, "ResumeComputeSystem", func(h computecore.System, op computecore.Operation) error {
		return s.api.ResumeComputeSystem(h, op, "")
	})
	return err
}

// Properties returns the basic properties and, for each of types, that property.
func (s *System) Properties(ctx context.Context, types ...schema2.PropertyType) (*schema2.Properties, error) {
	const opName = "GetComputeSystemProperties"
	q, _ := marshal(schema2.PropertyQuery{PropertyTypes: types})
	doc, err := s.systemOp(ctx, opName, func(h computecore.System, op computecore.Operation) error {
		return s.api.GetComputeSystemProperties(h, op, q)
	})
	if err != nil {
		return nil, err
	}
	var props schema2.Properties
	if err := json.Unmarshal([]byte(doc), &props); err != nil {
		return nil, &Error{Op: opName, ID: s.id, Err: fmt.Errorf("decode properties %.200q: %w", doc, err)}
	}
	return &props, nil
}

// Modify applies a ModifySettingRequest (limits, mapped directories, devices…).
func (s *System) Modify(ctx context.Context, req *schema2.ModifySettingRequest) error {
	const opName = "ModifyComputeSystem"
	doc, err := marshal(req)
	if err != nil {
		return &Error{Op: opName, ID: s.id, Err: fmt.Errorf("encode %s request: %w: %w", req.ResourcePath, err, errdefs.ErrInvalidArgument)}
	}
	_, err = s.systemOp(ctx, opName, func(h computecore.System, op computecore.Operation) error {
		return s.api.ModifyComputeSystem(h, op, doc, 0)
	})
	return err
}

// Exited is closed when HCS reports that the system exited, or that the service went away.
func (s *System) Exited() <-chan struct{} { return s.exited }

// ExitError says why the system exited: nil for a clean stop. Valid once Exited is closed.
func (s *System) ExitError() error {
	select {
	case <-s.exited:
		return s.exitErr
	default:
		return nil
	}
}

// Close releases the handle. The compute system keeps running in HCS; Exited is not closed by
// Close.
func (s *System) Close() error {
	s.mu.Lock()
	h := s.handle
	s.handle = 0
	s.mu.Unlock()
	if h == 0 {
		return nil
	}
	s.api.CloseComputeSystem(h)
	s.released.Store(true)
	return nil
}

// subscribe registers for the system's notifications. The callback is a Go function kept by
// computecore's own registry (which hands C an integer key, never a Go pointer), so no second
// registry is needed here.
func (s *System) subscribe(ctx context.Context) {
	s.mu.RLock()
	h := s.handle
	s.mu.RUnlock()
	onEvent := func(ev computecore.Event, _ uintptr) {
		if !s.released.Load() {
			s.onEvent(ev)
		}
	}
	if err := s.api.SetComputeSystemCallback(h, computecore.EventOptionNone, 0, onEvent); err != nil {
		// Without notifications, fall back to a waiter so that Exited still works.
		log.G(ctx).WithField("system", s.id).WithError(err).Warn("SetComputeSystemCallback failed; waiting for exit instead")
		go func() {
			doc, err := s.api.WaitForComputeSystemExit(h, computecore.Infinite)
			if err != nil {
				s.markExited(&Error{Op: "WaitForComputeSystemExit", ID: s.id, Err: err, Detail: resultDetail(doc)})
				return
			}
			var st schema2.SystemExitStatus
			_ = json.Unmarshal([]byte(doc), &st)
			s.markExited(exitStatusError(s.id, st))
		}()
	}
}

func (s *System) onEvent(ev computecore.Event) {
	switch ev.Type {
	case computecore.EventSystemExited:
		var st schema2.SystemExitStatus
		if ev.EventData != "" {
			if err := json.Unmarshal([]byte(ev.EventData), &st); err != nil {
				log.L.WithField("system", s.id).WithError(err).Warnf("undecodable SystemExited event data %.200q", ev.EventData)
			}
		}
		s.markExited(exitStatusError(s.id, st))
	case computecore.EventServiceDisconnect:
		s.markExited(&Error{Op: "SystemExited", ID: s.id, Err: computecore.HCS_E_SERVICE_DISCONNECT, Detail: ev.EventData})
	default:
		log.L.WithFields(log.Fields{"system": s.id, "event": ev.Type.String()}).Debug("HCS system notification")
	}
}

// exitStatusError turns a SystemExitStatus into ExitError's value.
func exitStatusError(id string, st schema2.SystemExitStatus) error {
	switch {
	case st.Status != 0 && computecore.HRESULT(uint32(st.Status)).Failed():
		return &Error{Op: "SystemExited", ID: id, Err: computecore.HRESULT(uint32(st.Status))}
	case st.ExitType == schema2.NotificationUnexpectedExit:
		return &Error{Op: "SystemExited", ID: id, Err: computecore.HCS_E_UNEXPECTED_EXIT}
	}
	return nil
}

func (s *System) markExited(err error) {
	s.exitOnce.Do(func() {
		s.exitErr = err
		close(s.exited)
		log.L.WithField("system", s.id).WithError(err).Debug("compute system exited")
		s.procMu.Lock()
		procs := make([]*Process, 0, len(s.procs))
		for p := range s.procs {
			procs = append(procs, p)
		}
		s.procMu.Unlock()
		for _, p := range procs {
			go p.systemExited(err)
		}
	})
}

func (s *System) addProcess(p *Process) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	s.procs[p] = struct{}{}
}

func (s *System) removeProcess(p *Process) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	delete(s.procs, p)
}

// asError makes err an *Error for op/id/pid unless it already is one.
func asError(err error, op, id string, pid uint32) error {
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Op: op, ID: id, Pid: pid, Err: err}
}

func isCtxErr(err error) bool {
	e, ok := err.(*Error)
	if !ok {
		return false
	}
	_, ok = e.Err.(*ctxError)
	return ok
}
