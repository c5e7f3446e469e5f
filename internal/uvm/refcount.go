package uvm

import "sync"

// refs is a table of reference-counted resources of one VM, keyed by K. Its mutex guards the
// table only; the HCS calls that add and remove a resource are made without it: the entry is
// marked pending first, and a concurrent user of the same key waits for the call to end and
// looks again (no lock held across an HCS call; docs/architecture.md, "Robustness rules").
type refs[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]*ref[V]
}

type ref[V any] struct {
	v       V
	n       int
	pending chan struct{} // closed when the add or remove in flight ended; nil if none
}

// acquire takes a reference to key, adding the resource with add when it is not there. add
// runs without the lock and returns the resource's value.
func (t *refs[K, V]) acquire(key K, add func() (V, error)) (V, error) {
	for {
		t.mu.Lock()
		if t.m == nil {
			t.m = map[K]*ref[V]{}
		}
		r, ok := t.m[key]
		if ok && r.pending != nil {
			ch := r.pending
			t.mu.Unlock()
			<-ch
			continue
		}
		if ok {
			r.n++
			v := r.v
			t.mu.Unlock()
			return v, nil
		}
		r = &ref[V]{pending: make(chan struct{})}
		t.m[key] = r
		t.mu.Unlock()

		v, err := add()
		t.mu.Lock()
		if err != nil {
			delete(t.m, key)
		} else {
			r.v, r.n = v, 1
		}
		close(r.pending)
		r.pending = nil
		t.mu.Unlock()
		return v, err
	}
}

// release drops a reference to key; the last one removes the resource with remove (without
// the lock). If remove fails the reference is kept, so that a retry can release it again.
// Releasing a key that is not held is a no-op that reports false.
func (t *refs[K, V]) release(key K, remove func(V) error) (bool, error) {
	for {
		t.mu.Lock()
		r, ok := t.m[key]
		if !ok {
			t.mu.Unlock()
			return false, nil
		}
		if r.pending != nil {
			ch := r.pending
			t.mu.Unlock()
			<-ch
			continue
		}
		if r.n > 1 {
			r.n--
			t.mu.Unlock()
			return true, nil
		}
		r.pending = make(chan struct{})
		t.mu.Unlock()

		err := remove(r.v)
		t.mu.Lock()
		if err == nil {
			delete(t.m, key)
		}
		close(r.pending)
		r.pending = nil
		t.mu.Unlock()
		return true, err
	}
}

// count returns the references held on key (0 when absent).
func (t *refs[K, V]) count(key K) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.m[key]; ok {
		return r.n
	}
	return 0
}

// len returns how many resources the table holds.
func (t *refs[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// keys returns the keys the table holds.
func (t *refs[K, V]) keys() []K {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]K, 0, len(t.m))
	for k := range t.m {
		out = append(out, k)
	}
	return out
}
