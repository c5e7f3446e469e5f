package computecore

import (
	"sync"
	"syscall"

	"golang.org/x/sys/windows"
)

// HCS calls back into Go through two C-callable trampolines made once with syscall.NewCallback
// (whose supply is limited, so one per callback shape, never one per handle). The context
// pointer HCS hands back is not the caller's context but a key into callbacks, the registry of
// Go functions; the trampoline looks the key up and calls the function with the caller's own
// context. Keys are plain integers, never Go pointers, so nothing Go-owned is kept by C.

// hcsEvent is HCS_EVENT (computecore.h): HCS_EVENT_TYPE Type; PCWSTR EventData; HCS_OPERATION Operation.
type hcsEvent struct {
	Type      EventType
	EventData *uint16
	Operation Operation
}

type registration struct {
	fn      EventCallback
	context uintptr
}

var (
	callbacksMu sync.RWMutex
	callbacks           = map[uintptr]*registration{}
	nextKey     uintptr = 1

	trampolinesOnce  sync.Once
	eventTrampoline  uintptr // HCS_EVENT_CALLBACK: void (const HCS_EVENT*, void*)
	opDoneTrampoline uintptr // HCS_OPERATION_COMPLETION: void (HCS_OPERATION, void*)
)

func trampolines() (event, opDone uintptr) {
	trampolinesOnce.Do(func() {
		eventTrampoline = syscall.NewCallback(onEvent)
		opDoneTrampoline = syscall.NewCallback(onOperationDone)
	})
	return eventTrampoline, opDoneTrampoline
}

func register(fn EventCallback, context uintptr) uintptr {
	callbacksMu.Lock()
	defer callbacksMu.Unlock()
	key := nextKey
	nextKey++
	callbacks[key] = &registration{fn: fn, context: context}
	return key
}

func unregister(keys ...uintptr) {
	callbacksMu.Lock()
	defer callbacksMu.Unlock()
	for _, k := range keys {
		delete(callbacks, k)
	}
}

func lookup(key uintptr) (registration, bool) {
	callbacksMu.RLock()
	defer callbacksMu.RUnlock()
	r, ok := callbacks[key]
	if !ok {
		return registration{}, false
	}
	return *r, true
}

// onEvent is the HCS_EVENT_CALLBACK trampoline for system and process notifications.
func onEvent(event *hcsEvent, key uintptr) uintptr {
	r, ok := lookup(key)
	if !ok || r.fn == nil || event == nil {
		return 0
	}
	r.fn(Event{
		Type:      event.Type,
		EventData: windows.UTF16PtrToString(event.EventData),
		Operation: event.Operation,
	}, r.context)
	return 0
}

// onOperationDone is the HCS_OPERATION_COMPLETION trampoline; it reports the completion as an
// EventOperationCallback event so that API has one callback type.
func onOperationDone(op Operation, key uintptr) uintptr {
	r, ok := lookup(key)
	if !ok || r.fn == nil {
		return 0
	}
	r.fn(Event{Type: EventOperationCallback, Operation: op}, r.context)
	return 0
}
