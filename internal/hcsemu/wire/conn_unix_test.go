//go:build unix

package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func socketPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), fmt.Sprintf("sock%d", i))
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = NewConn(c.(*net.UnixConn))
		t.Cleanup(func() { conns[i].Close() })
	}
	return conns[0], conns[1]
}

// TestConnDescriptors sends frames with and without descriptors, large and small, and checks
// that each frame gets exactly its own descriptors, in order.
func TestConnDescriptors(t *testing.T) {
	a, b := socketPair(t)
	type sent struct {
		frame *Frame
		pipes []*os.File // write ends, kept here; read ends travel
	}
	var all []sent
	var fdsOf [][]int
	big := strings.Repeat("x", 200<<10) // more than the reader's buffer: read in pieces
	for i := 0; i < 20; i++ {
		n := i % 4
		var reads []int
		var writes []*os.File
		for j := 0; j < n; j++ {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			reads = append(reads, int(r.Fd()))
			writes = append(writes, w)
			defer r.Close()
			defer w.Close()
		}
		f := &Frame{ID: uint64(i + 1), Result: fmt.Sprintf("frame %d", i)}
		if i%5 == 0 {
			f.Result += big
		}
		all = append(all, sent{frame: f, pipes: writes})
		fdsOf = append(fdsOf, reads)
	}
	sendErr := make(chan error, 1)
	go func() {
		for i, s := range all {
			if err := a.Send(s.frame, fdsOf[i]...); err != nil {
				sendErr <- fmt.Errorf("send %d: %w", i, err)
				return
			}
		}
		sendErr <- nil
	}()
	for i, s := range all {
		f, fds, err := b.Receive()
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if f.ID != s.frame.ID || f.Result != s.frame.Result {
			t.Fatalf("frame %d: got id %d", i, f.ID)
		}
		if len(fds) != len(s.pipes) {
			t.Fatalf("frame %d: %d descriptors, want %d", i, len(fds), len(s.pipes))
		}
		for j, fd := range fds {
			msg := fmt.Sprintf("frame %d pipe %d", i, j)
			s.pipes[j].WriteString(msg)
			s.pipes[j].Close()
			r := os.NewFile(uintptr(fd), "received")
			got, _ := io.ReadAll(r)
			r.Close()
			if string(got) != msg {
				t.Errorf("descriptor %d of frame %d reads %q, want %q", j, i, got, msg)
			}
		}
	}
	if err := <-sendErr; err != nil {
		t.Fatal(err)
	}
}

func TestConnRejectsBadFrames(t *testing.T) {
	a, _ := socketPair(t)
	if err := a.Send(&Frame{ID: 1}, 1, 2, 3, 4); err == nil {
		t.Error("sent four descriptors")
	}
	if err := a.Send(&Frame{ID: 2, Result: strings.Repeat("x", MaxFrameSize)}); err == nil {
		t.Error("sent a frame larger than MaxFrameSize")
	}
	tests := []struct {
		name string
		raw  []byte
	}{
		{"length too large", []byte{0xff, 0xff, 0xff, 0xff}},
		{"truncated body", append(binary.BigEndian.AppendUint32(nil, 10), []byte("{}")...)},
		{"not JSON", append(binary.BigEndian.AppendUint32(nil, 3), []byte("abc")...)},
		{"claims descriptors it cannot have", frameBytes(t, `{"id":1,"fds":9}`)},
		{"claims descriptors never sent", frameBytes(t, `{"id":1,"fds":1}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := socketPair(t)
			a.uc.Write(tt.raw)
			a.CloseWrite()
			if f, _, err := b.Receive(); err == nil {
				t.Errorf("received %+v", f)
			}
		})
	}
}

func frameBytes(t *testing.T, body string) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.BigEndian, uint32(len(body)))
	buf.WriteString(body)
	return buf.Bytes()
}

func TestDecodeArgsIsStrict(t *testing.T) {
	f, err := NewRequest(1, MethodOpenComputeSystem, OpenSystemArgs{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var a OpenSystemArgs
	if err := f.DecodeArgs(&a); err != nil || a.ID != "x" {
		t.Fatalf("decode %+v: %v", a, err)
	}
	f.Args = json.RawMessage(`{"id":"x","extra":1}`)
	if err := f.DecodeArgs(&a); err == nil {
		t.Error("accepted an unknown field in args")
	}
}
