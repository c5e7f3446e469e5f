package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/typeurl/v2"
)

// syncTopic is the topic WatchTaskEvents publishes to itself to learn that its subscription is
// live.
const syncTopic = "/runhcs-test/sync"

// TaskEvents records containerd's TaskExit events of init processes (ID == ContainerID) and its
// TaskDelete events, by container id, from a subscription that was live before
// WatchTaskEvents returned. A shim publishes a task's events in order, so once a task's
// TaskDelete is recorded every TaskExit of it is too: CheckDeleted relies on that to see a
// duplicate exit.
type TaskEvents struct {
	mu      sync.Mutex
	exits   map[string][]*apievents.TaskExit
	deleted map[string]bool
}

// WatchTaskEvents subscribes to client's TaskExit and TaskDelete events until ctx ends or t's
// cleanup runs. It returns once the subscription is live: containerd's client subscribes in the
// background, so an event published right after Subscribe returns may be missed; it publishes
// a sync event of its own until that comes back (for up to 30 s, else it fails t).
func WatchTaskEvents(ctx context.Context, t testing.TB, client *containerd.Client) *TaskEvents {
	t.Helper()
	ev := &TaskEvents{exits: map[string][]*apievents.TaskExit{}, deleted: map[string]bool{}}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	es := client.EventService()
	envelopes, errs := es.Subscribe(ctx, `topic=="/tasks/exit"`, `topic=="/tasks/delete"`, `topic=="`+syncTopic+`"`)
	live := make(chan struct{})
	go func() {
		for {
			select {
			case e := <-envelopes:
				if e.Topic == syncTopic {
					select {
					case <-live:
					default:
						close(live)
					}
					continue
				}
				v, err := typeurl.UnmarshalAny(e.Event)
				if err != nil {
					continue
				}
				ev.mu.Lock()
				switch x := v.(type) {
				case *apievents.TaskExit:
					if x.ID == x.ContainerID {
						ev.exits[x.ContainerID] = append(ev.exits[x.ContainerID], x)
					}
				case *apievents.TaskDelete:
					ev.deleted[x.ContainerID] = true
				}
				ev.mu.Unlock()
			case <-errs:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	for deadline := time.After(30 * time.Second); ; {
		if err := es.Publish(ctx, syncTopic, &apievents.ContainerUpdate{ID: "sync"}); err != nil {
			t.Fatalf("publish %s: %v", syncTopic, err)
		}
		select {
		case <-live:
			return ev
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the event subscription did not become live in 30s")
		}
	}
}

// Exits is the number of TaskExit events of container id's init process so far.
func (ev *TaskEvents) Exits(id string) int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.exits[id])
}

// WaitExit returns the first TaskExit of container id's init process, failing t if none comes
// within d.
func (ev *TaskEvents) WaitExit(t testing.TB, id string, d time.Duration) *apievents.TaskExit {
	t.Helper()
	var e *apievents.TaskExit
	err := ev.waitFor(d, func() bool {
		if len(ev.exits[id]) > 0 {
			e = ev.exits[id][0]
		}
		return e != nil
	})
	if err != nil {
		t.Fatalf("no TaskExit event for %s within %v", id, d)
	}
	return e
}

// CheckDeleted waits for the TaskDelete events of ids and then wants exactly one TaskExit of
// each (every TaskExit of a task comes before its TaskDelete).
func (ev *TaskEvents) CheckDeleted(ids []string, d time.Duration) error {
	err := ev.waitFor(d, func() bool {
		for _, id := range ids {
			if !ev.deleted[id] {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("no TaskDelete events for all of %v within %v", ids, d)
	}
	return ev.oneExitEach(ids)
}

// CheckExited waits until each of ids has a TaskExit event and then wants exactly one of each
// (for tasks whose TaskDelete does not come, such as those of a shim that died).
func (ev *TaskEvents) CheckExited(ids []string, d time.Duration) error {
	err := ev.waitFor(d, func() bool {
		for _, id := range ids {
			if len(ev.exits[id]) == 0 {
				return false
			}
		}
		return true
	})
	if err != nil {
		ev.mu.Lock()
		counts := map[string]int{}
		for _, id := range ids {
			counts[id] = len(ev.exits[id])
		}
		ev.mu.Unlock()
		return fmt.Errorf("TaskExit events within %v: %v, want one of each of %v", d, counts, ids)
	}
	return ev.oneExitEach(ids)
}

func (ev *TaskEvents) oneExitEach(ids []string) error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if n := len(ev.exits[id]); n != 1 {
			errs = append(errs, fmt.Errorf("%s: %d TaskExit events, want 1", id, n))
		}
	}
	return errors.Join(errs...)
}

// waitFor polls done, under ev.mu, until it is true or d has passed.
func (ev *TaskEvents) waitFor(d time.Duration, done func() bool) error {
	deadline := time.Now().Add(d)
	for {
		ev.mu.Lock()
		ok := done()
		ev.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
