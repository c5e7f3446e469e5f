package computecore_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// attachedPipe is an AttachPipe connection the stand-in opened (fakeDaemon.handle).
type attachedPipe struct {
	args wire.AttachPipeArgs
	c    net.Conn
}

var pipeAttaches = make(chan attachedPipe, 4)

func nextAttach(t *testing.T, token string) attachedPipe {
	t.Helper()
	select {
	case a := <-pipeAttaches:
		if a.args.Token != token {
			t.Fatalf("AttachPipe with token %q, want %q", a.args.Token, token)
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("no AttachPipe for token %q within 30s", token)
	}
	return attachedPipe{}
}

// TestStandInMappedPipe plays hcsemu's part for a host pipe mapped into a container (hack/wine
// README, "Host named pipes mapped into a process-isolated container"): on a PipeConnect event
// the stand-in opens the host pipe, which this test serves with go-winio, attaches it with the
// event's token, and relays both ways; the end of the daemon's side closes the pipe. A pipe
// that is not there is attached with ERROR_FILE_NOT_FOUND. The event reaches no callback.
func TestStandInMappedPipe(t *testing.T) {
	api, d := standInAPI(t)
	cs, err := api.OpenComputeSystem("c1", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseComputeSystem(cs)
	evs := make(events, 4)
	if err := api.SetComputeSystemCallback(cs, computecore.EventOptionNone, 1, evs.callback); err != nil {
		t.Fatal(err)
	}
	hostPipe := fmt.Sprintf(`\\.\pipe\standin-mapped-%d`, time.Now().UnixNano())
	ln, err := winio.ListenPipe(hostPipe, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan string, 2) // the line the server read, then "end" at the client's close
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			served <- "read: " + err.Error()
			return
		}
		served <- line
		io.WriteString(c, "from the host\n")
		if b, err := io.ReadAll(c); err == nil || errors.Is(err, io.EOF) {
			served <- fmt.Sprintf("end after %q", b)
		} else {
			served <- "end: " + err.Error()
		}
	}()

	ref := wire.SystemRef{ID: "c1"}
	d.send(&wire.Frame{Event: &wire.Event{System: ref, Pipe: &wire.PipeConnect{HostPath: hostPipe, Token: "pipe-1"}}})
	a := nextAttach(t, "pipe-1")
	defer a.c.Close()
	if a.args.Error != 0 {
		t.Fatalf("AttachPipe error %d: the stand-in could not open %s", a.args.Error, hostPipe)
	}
	a.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(a.c, "from the container\n"); err != nil {
		t.Fatal(err)
	}
	if got := <-served; got != "from the container\n" {
		t.Fatalf("the host pipe's server: %s", got)
	}
	if line, err := bufio.NewReader(a.c).ReadString('\n'); err != nil || line != "from the host\n" {
		t.Fatalf("the daemon's side read %q, %v; want the server's answer", line, err)
	}
	// The container's end closes the host pipe: its server reads the end.
	a.c.(*bufferedConn).Conn.(*net.TCPConn).CloseWrite()
	select {
	case got := <-served:
		if got != `end after ""` {
			t.Errorf("the host pipe's server at the container's end: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Error("the host pipe's server did not see the container's end within 30s")
	}
	// And the stand-in then ends its side of the connection.
	if b, err := io.ReadAll(a.c); err != nil || len(b) != 0 {
		t.Errorf("after the end the connection read %q, %v; want its end", b, err)
	}

	d.send(&wire.Frame{Event: &wire.Event{System: ref, Pipe: &wire.PipeConnect{HostPath: hostPipe + "-absent", Token: "pipe-2"}}})
	if a := nextAttach(t, "pipe-2"); a.args.Error != 2 {
		t.Errorf("AttachPipe of a pipe that is not there: error %d, want ERROR_FILE_NOT_FOUND (2)", a.args.Error)
	} else {
		a.c.Close()
	}
	select {
	case ev := <-evs:
		t.Errorf("the system's callback got %+v from a pipe event", ev)
	default:
	}
}
