package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/openhcs/runhcs/internal/computecore"
)

// MaxFrameSize bounds one frame, so that a corrupt length cannot make a reader allocate without
// limit. HCS documents are a few KiB; enumerations of many systems stay far below this.
const MaxFrameSize = 16 << 20

// MaxFDsPerFrame is the most descriptors one frame carries: stdin, stdout and stderr.
const MaxFDsPerFrame = 3

// Methods, named after the computecore.dll function each one serves (without "Hcs"), plus
// MethodCancel, which cancels a request still running.
const (
	MethodCreateComputeSystem        = "CreateComputeSystem"
	MethodOpenComputeSystem          = "OpenComputeSystem"
	MethodCloseComputeSystem         = "CloseComputeSystem"
	MethodEnumerateComputeSystems    = "EnumerateComputeSystems"
	MethodStartComputeSystem         = "StartComputeSystem"
	MethodShutDownComputeSystem      = "ShutDownComputeSystem"
	MethodTerminateComputeSystem     = "TerminateComputeSystem"
	MethodPauseComputeSystem         = "PauseComputeSystem"
	MethodResumeComputeSystem        = "ResumeComputeSystem"
	MethodGetComputeSystemProperties = "GetComputeSystemProperties"
	MethodModifyComputeSystem        = "ModifyComputeSystem"
	MethodCreateProcess              = "CreateProcess"
	MethodOpenProcess                = "OpenProcess"
	MethodCloseProcess               = "CloseProcess"
	MethodTerminateProcess           = "TerminateProcess"
	MethodSignalProcess              = "SignalProcess"
	MethodGetProcessProperties       = "GetProcessProperties"
	MethodModifyProcess              = "ModifyProcess"
	MethodGetServiceProperties       = "GetServiceProperties"
	MethodModifyServiceSettings      = "ModifyServiceSettings"
	MethodCancel                     = "Cancel"
)

// MethodAttachStdio is the first and only frame of a stdio connection on the TCP transport
// (see doc.go): it names the stream by its reply's StdioToken and its slot, and the daemon
// sends no response. It is not a request of a control connection.
const MethodAttachStdio = "AttachStdio"

// MethodAttachPipe is the first and only frame of a mapped pipe's connection on the TCP
// transport: a client that got an Event with a PipeConnect opens the host pipe it names and
// then a connection whose first frame is this, with the event's token; the connection then
// carries the bytes between the container's client and the host pipe. With Error set (the
// Win32 error of opening the host pipe) it carries nothing and the daemon closes the
// container's client. The daemon sends no response.
const MethodAttachPipe = "AttachPipe"

// Frame is every message on the socket. A request has ID, Method and Args. A response has the
// request's ID, HResult (0 for success), Result (the HCS result document: on failure the
// ResultError document), Reply (method-specific, see the …Reply types) and FDs. An event has ID
// 0 and Event.
type Frame struct {
	ID      uint64              `json:"id,omitempty"`
	Method  string              `json:"method,omitempty"`
	Args    json.RawMessage     `json:"args,omitempty"`
	HResult computecore.HRESULT `json:"hresult,omitempty"`
	Result  string              `json:"result,omitempty"`
	Reply   json.RawMessage     `json:"reply,omitempty"`
	FDs     int                 `json:"fds,omitempty"`
	Event   *Event              `json:"event,omitempty"`
}

// SystemRef names a compute system on the wire. Instance 0 matches any instance (used by Open).
type SystemRef struct {
	ID       string `json:"id"`
	Instance uint64 `json:"instance,omitempty"`
}

// ProcessRef names a process of a compute system.
type ProcessRef struct {
	System SystemRef `json:"system"`
	PID    uint32    `json:"pid"`
}

// CreateSystemArgs are the args of MethodCreateComputeSystem.
type CreateSystemArgs struct {
	ID            string `json:"id"`
	Configuration string `json:"configuration"`
}

// OpenSystemArgs are the args of MethodOpenComputeSystem.
type OpenSystemArgs struct {
	ID string `json:"id"`
}

// SystemReply is the reply of MethodCreateComputeSystem and MethodOpenComputeSystem: the
// instance the handle refers to and, when the system has already stopped, its exit status
// document (a schema2.SystemExitStatus).
type SystemReply struct {
	Instance   uint64 `json:"instance"`
	Stopped    bool   `json:"stopped,omitempty"`
	ExitStatus string `json:"exitStatus,omitempty"`
}

// SystemArgs are the args of the methods on one system (start, shut down, terminate, pause,
// resume, get properties, modify, close): Document is the options, query or settings document.
type SystemArgs struct {
	System   SystemRef `json:"system"`
	Document string    `json:"document,omitempty"`
}

// ModifyServiceArgs are the args of MethodModifyServiceSettings.
type ModifyServiceArgs struct {
	Settings string `json:"settings"`
}

// QueryArgs are the args of MethodEnumerateComputeSystems and MethodGetServiceProperties.
type QueryArgs struct {
	Query string `json:"query,omitempty"`
}

// CreateProcessArgs are the args of MethodCreateProcess.
type CreateProcessArgs struct {
	System     SystemRef `json:"system"`
	Parameters string    `json:"parameters"`
}

// Std stream slots, in the order descriptors are attached to a ProcessReply's frame.
const (
	StdIn = iota
	StdOut
	StdErr
)

// ProcessReply is the reply of MethodCreateProcess and MethodOpenProcess. Stdio says which std
// streams have a descriptor attached, in slot order; Console says the stdin and stdout slots are
// one pseudo console master, sent once (the client duplicates it). When the process has already
// exited, ExitStatus is its exit document (a schema2.ProcessExitedEventData).
//
// On the TCP transport no descriptors are attached: StdioToken names the streams instead, for
// the client's AttachStdio connections (one per slot whose Stdio entry is true; with Console,
// slots 0 and 1 are both the pseudo console master).
type ProcessReply struct {
	PID        uint32  `json:"pid"`
	Stdio      [3]bool `json:"stdio,omitzero"`
	Console    bool    `json:"console,omitempty"`
	Exited     bool    `json:"exited,omitempty"`
	ExitStatus string  `json:"exitStatus,omitempty"`
	StdioToken string  `json:"stdioToken,omitempty"`
}

// AttachStdioArgs are the args of MethodAttachStdio: the StdioToken of a ProcessReply and the
// slot (StdIn, StdOut or StdErr) this connection carries.
type AttachStdioArgs struct {
	Token string `json:"token"`
	Slot  int    `json:"slot"`
}

// AttachPipeArgs are the args of MethodAttachPipe: the Token of a PipeConnect, and Error, the
// Win32 error code of opening its host pipe (0: it is open).
type AttachPipeArgs struct {
	Token string `json:"token"`
	Error uint32 `json:"error,omitempty"`
}

// ProcessArgs are the args of the methods on one process (terminate, signal, get properties,
// modify, close): Document is the options, query or settings document.
type ProcessArgs struct {
	Process  ProcessRef `json:"process"`
	Document string     `json:"document,omitempty"`
}

// CancelArgs are the args of MethodCancel: the id of the request to cancel. A cancelled request
// still gets its response (failing with the cancellation, unless it finished first).
type CancelArgs struct {
	Request uint64 `json:"request"`
}

// Event is a notification pushed by the daemon. For computecore.EventSystemExited, PID is 0 and
// Data is a schema2.SystemExitStatus; for computecore.EventProcessExited, Data is a
// schema2.ProcessExitedEventData. An event with Pipe set (and Type 0, HcsEventInvalid) is no
// HCS notification but a request to the TCP client to relay a mapped pipe (MethodAttachPipe);
// the client does not pass it on.
type Event struct {
	Type   computecore.EventType `json:"type"`
	System SystemRef             `json:"system"`
	PID    uint32                `json:"pid,omitempty"`
	Data   string                `json:"data,omitempty"`
	Pipe   *PipeConnect          `json:"pipe,omitempty"`
}

// PipeConnect says that a process of System opened a host named pipe mapped into it
// (Container.MappedPipes): the client opens HostPath (\\.\pipe\NAME, on its own Windows
// side) and attaches it with MethodAttachPipe and Token before the token expires.
type PipeConnect struct {
	HostPath string `json:"hostPath"`
	Token    string `json:"token"`
}

// NewRequest builds a request frame, encoding args.
func NewRequest(id uint64, method string, args any) (*Frame, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode args of %s: %w", method, err)
	}
	return &Frame{ID: id, Method: method, Args: b}, nil
}

// DecodeArgs decodes a request's args strictly: an unknown field is a protocol error.
func (f *Frame) DecodeArgs(v any) error {
	return decodeStrict(f.Args, v, "args of "+f.Method)
}

// DecodeReply decodes a response's reply.
func (f *Frame) DecodeReply(v any) error {
	if len(f.Reply) == 0 {
		return fmt.Errorf("response %d has no reply", f.ID)
	}
	return decodeStrict(f.Reply, v, "reply")
}

func decodeStrict(b []byte, v any, what string) error {
	if len(b) == 0 {
		b = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// encodeFrame returns the frame's bytes with their length prefix.
func encodeFrame(f *Frame) ([]byte, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode frame %d: %w", f.ID, err)
	}
	if len(body) > MaxFrameSize {
		return nil, fmt.Errorf("frame %d is %d bytes, more than %d", f.ID, len(body), MaxFrameSize)
	}
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b, nil
}

// WriteFrame writes f, length-prefixed, to a byte stream (the TCP transport, which carries no
// descriptors: f.FDs must be 0). Concurrent writers must serialise their calls.
func WriteFrame(w io.Writer, f *Frame) error {
	if f.FDs != 0 {
		return fmt.Errorf("frame %d: %d descriptors cannot travel on a byte stream", f.ID, f.FDs)
	}
	b, err := encodeFrame(f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// ReadFrame reads one length-prefixed frame from a byte stream (the TCP transport). A frame
// that claims descriptors is an error there, since none can come with it.
func ReadFrame(r io.Reader) (*Frame, error) {
	return ReadFrameMax(r, MaxFrameSize)
}

// ReadFrameMax is ReadFrame for a frame of at most max bytes, such as the first frame of a
// connection not yet authenticated (MaxAuthenticateFrame). It reads no byte past the frame.
func ReadFrameMax(r io.Reader, max uint32) (*Frame, error) {
	f, err := readFrame(r, max)
	if err != nil {
		return nil, err
	}
	if f.FDs != 0 {
		return nil, fmt.Errorf("frame %d claims %d descriptors on a byte stream", f.ID, f.FDs)
	}
	return f, nil
}

// readFrame reads one length-prefixed frame of at most max bytes from r.
func readFrame(r io.Reader, max uint32) (*Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > max {
		return nil, fmt.Errorf("frame of %d bytes is more than %d: %w", n, max, io.ErrUnexpectedEOF)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	var f Frame
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("decode frame: %w", err)
	}
	if f.FDs < 0 || f.FDs > MaxFDsPerFrame {
		return nil, fmt.Errorf("frame %d claims %d descriptors", f.ID, f.FDs)
	}
	return &f, nil
}
