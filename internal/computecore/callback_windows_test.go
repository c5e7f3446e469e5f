package computecore

import (
	"testing"

	"golang.org/x/sys/windows"
)

// The trampolines' dispatch, without computecore.dll: HCS hands back the registry key as the
// context, and the registered function must get the caller's own context and the event.
func TestEventDispatch(t *testing.T) {
	type got struct {
		ev  Event
		ctx uintptr
	}
	tests := []struct {
		name string
		typ  EventType
		data string
		op   Operation
	}{
		{"system exited", EventSystemExited, `{"Status":0,"ExitType":"GracefulExit"}`, 0},
		{"process exited", EventProcessExited, `{"Status":0,"ExitCode":3}`, 0},
		{"no data", EventServiceDisconnect, "", 0},
		{"operation", EventOperationCallback, "", 42},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := make(chan got, 1)
			key := register(func(ev Event, ctx uintptr) { c <- got{ev, ctx} }, 0xfeed)
			defer unregister(key)
			ev := hcsEvent{Type: tc.typ, Operation: tc.op}
			if tc.data != "" {
				ev.EventData = windows.StringToUTF16Ptr(tc.data)
			}
			onEvent(&ev, key)
			select {
			case g := <-c:
				if g.ctx != 0xfeed || g.ev.Type != tc.typ || g.ev.EventData != tc.data || g.ev.Operation != tc.op {
					t.Errorf("callback got %+v, context %#x", g.ev, g.ctx)
				}
			default:
				t.Fatal("callback not called")
			}
		})
	}
}

func TestUnregisteredKeyIsIgnored(t *testing.T) {
	called := false
	key := register(func(Event, uintptr) { called = true }, 0)
	unregister(key)
	onEvent(&hcsEvent{Type: EventSystemExited}, key)
	onOperationDone(1, key)
	if called {
		t.Error("a callback ran after its registration was removed")
	}
}

func TestOperationDoneIsAnOperationEvent(t *testing.T) {
	var got Event
	key := register(func(ev Event, _ uintptr) { got = ev }, 0)
	defer unregister(key)
	onOperationDone(7, key)
	if got.Type != EventOperationCallback || got.Operation != 7 {
		t.Errorf("operation completion delivered as %+v", got)
	}
}

func TestHRESULTConversion(t *testing.T) {
	if err := hresult(0); err != nil {
		t.Errorf("S_OK: %v", err)
	}
	if err := hresult(1); err != nil { // S_FALSE is success too
		t.Errorf("S_FALSE: %v", err)
	}
	err := hresult(int32(-2143878898)) // 0x8037010E
	if err != HCS_E_SYSTEM_NOT_FOUND {
		t.Errorf("0x8037010E became %v", err)
	}
}
