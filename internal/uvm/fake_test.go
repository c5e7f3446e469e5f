package uvm

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/openhcs/runhcs/internal/hcs"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// fakeHost creates fakeSystems and keeps the document it was given.
type fakeHost struct {
	doc string
	sys *fakeSystem
	err error
}

func (h *fakeHost) CreateComputeSystem(_ context.Context, id string, document any) (System, error) {
	if h.err != nil {
		return nil, h.err
	}
	b, err := json.Marshal(document)
	if err != nil {
		return nil, err
	}
	h.doc = string(b)
	h.sys = &fakeSystem{id: id, exited: make(chan struct{})}
	return h.sys, nil
}

// fakeSystem records every modify request as "<RequestType> <ResourcePath or guest resource>"
// and fails those that failOn names.
type fakeSystem struct {
	id     string
	exited chan struct{}

	mu   sync.Mutex
	log  []string
	docs []string
	reqs []string // every request as sent, in JSON
	// failHook, when set, may fail a request by its log line.
	failHook func(line string) error
	failOn   map[string]error
	props    *schema2.Properties
	started  bool
}

func (s *fakeSystem) ID() string { return s.id }
func (s *fakeSystem) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	return nil
}
func (s *fakeSystem) Terminate(context.Context) error {
	s.crash()
	return nil
}
func (s *fakeSystem) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.exited:
	default:
		close(s.exited)
	}
}
func (s *fakeSystem) Exited() <-chan struct{} { return s.exited }
func (s *fakeSystem) Close() error            { return nil }
func (s *fakeSystem) Properties(context.Context, ...schema2.PropertyType) (*schema2.Properties, error) {
	return s.props, nil
}

func (s *fakeSystem) Modify(_ context.Context, req *schema2.ModifySettingRequest) error {
	select {
	case <-s.exited:
		return fmt.Errorf("modify: %w", hcs.ErrNotFound)
	default:
	}
	full, _ := json.MarshalIndent(req, "", "  ")
	what := req.ResourcePath
	if g, ok := req.GuestRequest.(*schema2.GuestModifySettingRequest); ok {
		what = "guest " + string(g.ResourceType)
		req = &schema2.ModifySettingRequest{RequestType: g.RequestType, Settings: g.Settings}
	}
	line := fmt.Sprintf("%s %s", req.RequestType, what)
	b, _ := json.Marshal(req.Settings)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failHook != nil {
		if err := s.failHook(line); err != nil {
			return err
		}
	}
	if err := s.failOn[line]; err != nil {
		return err
	}
	s.log = append(s.log, line)
	s.docs = append(s.docs, string(b))
	s.reqs = append(s.reqs, string(full))
	return nil
}

func (s *fakeSystem) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}
