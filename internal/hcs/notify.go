package hcs

import (
	"sync"

	"github.com/openhcs/runhcs/internal/computecore"
)

// HCS notifications arrive through one EventCallback per kind of handle; the callback context
// is a key into this notifyTable (never a Go pointer, which computecore implementations may hand
// to C), and the notifyTable finds the System or Process the event is for.
var notifyTable = struct {
	sync.Mutex
	next    uintptr
	systems map[uintptr]*System
	procs   map[uintptr]*Process
}{next: 1, systems: map[uintptr]*System{}, procs: map[uintptr]*Process{}}

func registerSystem(s *System) uintptr {
	notifyTable.Lock()
	defer notifyTable.Unlock()
	k := notifyTable.next
	notifyTable.next++
	notifyTable.systems[k] = s
	return k
}

func registerProcess(p *Process) uintptr {
	notifyTable.Lock()
	defer notifyTable.Unlock()
	k := notifyTable.next
	notifyTable.next++
	notifyTable.procs[k] = p
	return k
}

func unregisterKey(k uintptr) {
	notifyTable.Lock()
	defer notifyTable.Unlock()
	delete(notifyTable.systems, k)
	delete(notifyTable.procs, k)
}

// systemCallback is the EventCallback given to SetComputeSystemCallback.
func systemCallback(ev computecore.Event, key uintptr) {
	notifyTable.Lock()
	s := notifyTable.systems[key]
	notifyTable.Unlock()
	if s != nil {
		s.onEvent(ev)
	}
}

// processCallback is the EventCallback given to SetProcessCallback.
func processCallback(ev computecore.Event, key uintptr) {
	notifyTable.Lock()
	p := notifyTable.procs[key]
	notifyTable.Unlock()
	if p != nil {
		p.onEvent(ev)
	}
}
