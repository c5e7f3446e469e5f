package harness

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestChurnRunsEachOnce(t *testing.T) {
	const n, parallel = 200, 8
	var mu sync.Mutex
	seen := map[int]int{}
	var running, most atomic.Int32
	errs := Churn(n, parallel, func(i int) error {
		r := running.Add(1)
		for {
			m := most.Load()
			if r <= m || most.CompareAndSwap(m, r) {
				break
			}
		}
		mu.Lock()
		seen[i]++
		mu.Unlock()
		running.Add(-1)
		return nil
	})
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(seen) != n {
		t.Fatalf("%d distinct calls, want %d", len(seen), n)
	}
	for i, c := range seen {
		if i < 0 || i >= n || c != 1 {
			t.Errorf("work(%d) called %d times, want once", i, c)
		}
	}
	if m := most.Load(); m > parallel {
		t.Errorf("%d calls at a time, want at most %d", m, parallel)
	}
}

func TestChurnStopsAfterAFailure(t *testing.T) {
	const n = 1000
	var calls atomic.Int32
	boom := errors.New("boom")
	errs := Churn(n, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Fatalf("errors %v, want the one failure", errs)
	}
	// One worker: work(3) fails before work(5) is handed out (at most one more is taken
	// while the failure is recorded).
	if c := calls.Load(); c > 5 {
		t.Errorf("%d calls after a failure at the 4th, want the churn stopped", c)
	}
}
