package wintest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// The console control events the shim sends a HostProcess container's processes
// (internal/hostprocess process_windows.go Signal: AttachConsole, then GenerateConsoleCtrlEvent
// with group 0). Wine 8 generates CTRL_C_EVENT only; hack/wine/winectrl.c fills in
// CTRL_BREAK_EVENT. The test holds for Windows too.

// ctrlHelperEnv makes the test binary say "waiting", then the console control event it gets
// (as the Go runtime names it: both events are os.Interrupt), or "nothing" after a minute.
const ctrlHelperEnv = "RUNHCS_WINTEST_CTRL_HELPER"

func waitCtrl() int {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	fmt.Println("waiting")
	select {
	case s := <-ch:
		fmt.Println("got", s)
	case <-time.After(time.Minute):
		fmt.Println("nothing")
	}
	return 0
}

var (
	kernel32              = windows.NewLazySystemDLL("kernel32.dll")
	procAttachConsole     = kernel32.NewProc("AttachConsole")
	procFreeConsole       = kernel32.NewProc("FreeConsole")
	procSetConsoleCtrlHnd = kernel32.NewProc("SetConsoleCtrlHandler")
)

// ctrlHelper is a helper with a console of its own, waiting for an event.
type ctrlHelper struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func startCtrlHelper(t *testing.T) *ctrlHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), ctrlHelperEnv+"=1")
	cmd.SysProcAttr = &windows.SysProcAttr{CreationFlags: windows.CREATE_NEW_CONSOLE, HideWindow: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &ctrlHelper{cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := h.out.ReadString('\n'); strings.TrimSpace(line) != "waiting" {
		t.Fatalf("helper %d: %q, %v", cmd.Process.Pid, line, err)
	}
	return h
}

// ctrlSignallerEnv runs TestConsoleCtrlEvents' body in a process of its own: it detaches from its
// console and attaches to others', which would leave the test process without its console (and
// change what the later tests' helpers inherit: a helper started then got a console of its own,
// with one more process in its job).
const ctrlSignallerEnv = "RUNHCS_WINTEST_CTRL_SIGNALLER"

func TestConsoleCtrlEvents(t *testing.T) {
	if os.Getenv(ctrlSignallerEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConsoleCtrlEvents$", "-test.v", "-test.timeout=3m")
		cmd.Env = append(os.Environ(), ctrlSignallerEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test in a process of its own: %v\n%s", err, out)
		}
		t.Logf("the test in a process of its own:\n%s", out)
		return
	}
	// The test process attaches to its helpers' consoles and so gets the events too: its own
	// handler keeps it alive, as the shim's does.
	if r, _, err := procSetConsoleCtrlHnd.Call(windows.NewCallback(func(uint32) uintptr { return 1 }), 1); r == 0 {
		t.Fatalf("SetConsoleCtrlHandler: %v", err)
	}
	for _, ev := range []struct {
		name string
		code uint32
	}{{"CTRL_C_EVENT", windows.CTRL_C_EVENT}, {"CTRL_BREAK_EVENT", windows.CTRL_BREAK_EVENT}} {
		t.Run(ev.name, func(t *testing.T) {
			target, bystander := startCtrlHelper(t), startCtrlHelper(t)
			_, _, _ = procFreeConsole.Call()
			if r, _, err := procAttachConsole.Call(uintptr(target.cmd.Process.Pid)); r == 0 {
				t.Fatalf("AttachConsole(%d): %v", target.cmd.Process.Pid, err)
			}
			err := windows.GenerateConsoleCtrlEvent(ev.code, 0)
			_, _, _ = procFreeConsole.Call()
			if err != nil {
				t.Fatalf("GenerateConsoleCtrlEvent(%s, 0) on the console of process %d: %v", ev.name, target.cmd.Process.Pid, err)
			}
			if line, err := target.out.ReadString('\n'); strings.TrimSpace(line) != "got interrupt" {
				t.Errorf("the process on the console: %q, %v; want got interrupt", line, err)
			}
			// The other console's process must not have had it: after the target answered, it
			// is ended and what it said read to the end.
			_ = bystander.cmd.Process.Kill()
			rest, _ := io.ReadAll(bystander.out)
			if len(rest) != 0 {
				t.Errorf("a process on another console got %s: %q", ev.name, rest)
			}
		})
	}
}
