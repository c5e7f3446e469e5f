//go:build unix

package client

import "github.com/openhcs/runhcs/internal/computecore"

// emuObject is the client's side of one handle on a compute system (R = wire.SystemRef) or a
// process (R = wire.ProcessRef): what the daemon confirmed, its exit, and the callback.
type emuObject[R comparable] struct {
	ref       R
	ready     bool // the daemon confirmed the create or open
	exited    chan struct{}
	exitDoc   string
	exitEvent computecore.EventType // EventSystemExited or EventProcessExited
	n         notifier
}

func newEmuObject[R comparable](ref R, exitEvent computecore.EventType) *emuObject[R] {
	return &emuObject[R]{ref: ref, exited: make(chan struct{}), exitEvent: exitEvent}
}

// exit records the exit once and tells the callback.
func (o *emuObject[R]) exit(doc string) {
	select {
	case <-o.exited:
		return
	default:
	}
	o.exitDoc = doc
	close(o.exited)
	o.n.push(computecore.Event{Type: o.exitEvent, EventData: doc})
}

// handles is one kind of handle (systems or processes): the objects by handle, and the
// confirmed ones by what they refer to, so that an event reaches every handle open on it.
// Guarded by the client's mu.
type handles[H ~uintptr, R comparable] struct {
	objs  map[H]*emuObject[R]
	index map[R]map[H]struct{}
}

func newHandles[H ~uintptr, R comparable]() handles[H, R] {
	return handles[H, R]{objs: map[H]*emuObject[R]{}, index: map[R]map[H]struct{}{}}
}

// confirm marks h's object as confirmed by the daemon and indexes it by its (now complete) ref.
func (t *handles[H, R]) confirm(h H, o *emuObject[R]) {
	o.ready = true
	if t.index[o.ref] == nil {
		t.index[o.ref] = map[H]struct{}{}
	}
	t.index[o.ref][h] = struct{}{}
}

// remove forgets h and returns its object.
func (t *handles[H, R]) remove(h H) (*emuObject[R], bool) {
	o, ok := t.objs[h]
	if !ok {
		return nil, false
	}
	delete(t.objs, h)
	if hs := t.index[o.ref]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(t.index, o.ref)
		}
	}
	return o, true
}

// exitAll reports the exit of ref to every handle open on it, and whether there was any.
func (t *handles[H, R]) exitAll(ref R, doc string) bool {
	hs := t.index[ref]
	for h := range hs {
		t.objs[h].exit(doc)
	}
	return len(hs) > 0
}

// disconnect reports every confirmed object exited with doc, then the service's disconnect.
func (t *handles[H, R]) disconnect(doc string) {
	for _, o := range t.objs {
		if o.ready {
			o.exit(doc)
		}
		o.n.push(computecore.Event{Type: computecore.EventServiceDisconnect})
	}
}

// lookup returns h's object for a call to the daemon: E_HANDLE for an unknown handle,
// HCS_E_SERVICE_DISCONNECT once the daemon is gone, notReady for one it has not confirmed.
func lookup[H ~uintptr, R comparable](c *HCS, t *handles[H, R], h H, notReady computecore.HRESULT) (*emuObject[R], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := t.objs[h]
	if !ok {
		return nil, computecore.E_HANDLE
	}
	if c.disconnected {
		return nil, computecore.HCS_E_SERVICE_DISCONNECT
	}
	if !o.ready {
		return nil, notReady
	}
	return o, nil
}

// closeHandle forgets h and stops its callbacks. It returns the object and whether the daemon
// holds the handle too (confirmed, and the connection is up), so that the caller releases it
// there.
func closeHandle[H ~uintptr, R comparable](c *HCS, t *handles[H, R], h H) (*emuObject[R], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := t.remove(h)
	if !ok {
		return nil, false
	}
	o.n.close()
	return o, o.ready && !c.disconnected
}

// waitExit waits for h's object to exit, up to timeoutMs, and returns its exit document.
func waitExit[H ~uintptr, R comparable](c *HCS, t *handles[H, R], h H, timeoutMs uint32) (string, error) {
	c.mu.Lock()
	o, ok := t.objs[h]
	c.mu.Unlock()
	if !ok {
		return "", computecore.E_HANDLE
	}
	if err := waitTimeout(o.exited, timeoutMs); err != nil {
		return "", err
	}
	return o.exitDoc, nil
}

// setCallback sets h's callback. If the object has already exited, the callback gets the exit
// event at once (and EventServiceDisconnect if the daemon has gone), so that a caller
// registering late never waits for an event that came before it.
func setCallback[H ~uintptr, R comparable](c *HCS, t *handles[H, R], h H, context uintptr, callback computecore.EventCallback) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := t.objs[h]
	if !ok {
		return computecore.E_HANDLE
	}
	o.n.set(callback, context)
	select {
	case <-o.exited:
		o.n.push(computecore.Event{Type: o.exitEvent, EventData: o.exitDoc})
	default:
	}
	if c.disconnected {
		o.n.push(computecore.Event{Type: computecore.EventServiceDisconnect})
	}
	return nil
}
