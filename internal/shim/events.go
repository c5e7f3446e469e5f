package shim

import (
	"context"

	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/log"
)

// eventQueue forwards events to containerd in the order they were sent, from one goroutine,
// so that (for example) a TaskStart always precedes its TaskExit.
type eventQueue struct {
	ctx       context.Context
	publisher events.Publisher
	ch        chan queuedEvent
	done      chan struct{}
}

type queuedEvent struct {
	topic string
	event events.Event
}

func newEventQueue(ctx context.Context, p events.Publisher) *eventQueue {
	q := &eventQueue{ctx: ctx, publisher: p, ch: make(chan queuedEvent, 256), done: make(chan struct{})}
	go q.run()
	return q
}

// Send queues an event (task.Events).
func (q *eventQueue) Send(topic string, e events.Event) {
	q.ch <- queuedEvent{topic: topic, event: e}
}

func (q *eventQueue) run() {
	defer close(q.done)
	for e := range q.ch {
		// The containerd publisher queues and retries on its own.
		if err := q.publisher.Publish(q.ctx, e.topic, e.event); err != nil {
			log.G(q.ctx).WithError(err).WithField("topic", e.topic).Error("publish event")
		}
	}
}

// close stops the queue after forwarding what was sent.
func (q *eventQueue) close() {
	close(q.ch)
	<-q.done
}
