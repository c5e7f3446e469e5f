package wire

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// TestStreamFrames: WriteFrame and ReadFrame (the TCP transport) round-trip frames and refuse
// descriptors, which a byte stream cannot carry, in both directions.
func TestStreamFrames(t *testing.T) {
	req, err := NewRequest(7, MethodAttachStdio, AttachStdioArgs{Token: "t", Slot: StdErr})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range []*Frame{req, {ID: 7, Reply: []byte(`{"pid":3,"stdio":[true,false,false],"stdioToken":"t"}`)}, {Event: &Event{Type: 1, System: SystemRef{ID: "s"}}}} {
		if err := WriteFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFrame(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var a AttachStdioArgs
	if err := got.DecodeArgs(&a); err != nil || got.ID != 7 || got.Method != MethodAttachStdio || a != (AttachStdioArgs{Token: "t", Slot: StdErr}) {
		t.Errorf("request read back as %+v, args %+v, %v", got, a, err)
	}
	got, err = ReadFrame(&buf)
	var pr ProcessReply
	if err != nil || got.DecodeReply(&pr) != nil || pr.StdioToken != "t" || pr.PID != 3 {
		t.Errorf("reply read back as %+v (%+v), %v", got, pr, err)
	}
	if got, err = ReadFrame(&buf); err != nil || got.Event == nil || got.Event.System.ID != "s" {
		t.Errorf("event read back as %+v, %v", got, err)
	}

	if err := WriteFrame(&buf, &Frame{ID: 8, FDs: 1}); err == nil || !strings.Contains(err.Error(), "frame 8") {
		t.Errorf("WriteFrame with descriptors: %v, want an error naming the frame", err)
	}
	body := `{"id":9,"fds":2}`
	buf.Reset()
	buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
	buf.WriteString(body)
	if _, err := ReadFrame(&buf); err == nil || !strings.Contains(err.Error(), "frame 9 claims 2 descriptors") {
		t.Errorf("ReadFrame of a frame claiming descriptors: %v", err)
	}
}
