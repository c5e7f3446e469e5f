package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	type record struct {
		ID  string `json:"id"`
		Pid uint32 `json:"pid,omitempty"`
	}
	p := filepath.Join(t.TempDir(), "state.json")
	var r record
	if found, err := ReadJSON(p, &r); found || err != nil {
		t.Fatalf("ReadJSON of a missing file: %v, %v; want false, nil", found, err)
	}
	if err := WriteJSON(p, record{ID: "a", Pid: 7}, 0o600); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadJSON(p, &r); !found || err != nil || r != (record{ID: "a", Pid: 7}) {
		t.Fatalf("ReadJSON: %+v, %v, %v", r, found, err)
	}
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSON(p, &r); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("ReadJSON of a bad record: %v; want an error naming %s", err, p)
	}
	if err := WriteJSON(p, func() {}, 0o600); err == nil {
		t.Fatal("WriteJSON of a value JSON cannot encode: no error")
	}
}
