package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	bootapi "github.com/containerd/containerd/api/runtime/bootstrap/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/protocols/options"
)

func TestDecodeOptions(t *testing.T) {
	mk := func(o *options.Options) *anypb.Any {
		a, err := typeurl.MarshalAnyToProto(o)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name  string
		in    *anypb.Any
		level string
		err   string
	}{
		{"nil", nil, "", ""},
		{"debug", mk(&options.Options{Debug: true}), "debug", ""},
		{"log level wins", mk(&options.Options{Debug: true, LogLevel: "warn"}), "warn", ""},
		{"bad level", mk(&options.Options{LogLevel: "chatty"}), "", `log_level="chatty"`},
		{"negative", mk(&options.Options{VmMemorySizeInMb: -1}), "", "vm_memory_size_in_mb=-1"},
		{"isolation", mk(&options.Options{SandboxIsolation: 7}), "", "sandbox_isolation=7"},
		{"platform", mk(&options.Options{SandboxPlatform: "linux/amd64"}), "", `sandbox_platform="linux/amd64"`},
		{"wrong type", &anypb.Any{TypeUrl: "containerd.runc.v1.Options"}, "", "containerd.runc.v1.Options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := decodeOptions(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("err = %v, want InvalidArgument naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := logLevel(o); got != tc.level {
				t.Errorf("level %q, want %q", got, tc.level)
			}
		})
	}
	// The type URL containerd's CRI sends for this runtime.
	if u := mk(&options.Options{}).GetTypeUrl(); u != "containerd.runhcs.v1.Options" {
		t.Errorf("type url %q", u)
	}
}

func TestParseStartFlags(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
		want startFlags
	}{
		// containerd 1.7 (runtime/v2/binary.go) and 2.x (core/runtime/v2/command.go).
		{[]string{"-namespace", "k8s.io", "-address", "/run/containerd/containerd.sock", "-publish-binary", "/usr/bin/containerd", "-id", "c1", "start"}, true,
			startFlags{namespace: "k8s.io", address: "/run/containerd/containerd.sock", id: "c1"}},
		{[]string{"-namespace", "default", "-address", "a", "-publish-binary", "b", "-id", "c1", "-debug", "start"}, true,
			startFlags{namespace: "default", address: "a", id: "c1", debug: true}},
		{[]string{"-namespace", "default", "-id", "c1", "-bundle", "/b", "delete"}, false, startFlags{}},
		{[]string{"-namespace", "default", "-id", "c1"}, false, startFlags{}},
		{[]string{"-v"}, false, startFlags{}},
	}
	for _, tc := range tests {
		got, ok := parseStartFlags(tc.args)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseStartFlags(%q) = %+v, %v", tc.args, got, ok)
		}
	}
}

// TestStartOutput: the start document must be read as version 2 by containerd 1.7 (JSON,
// version ≤ 2) and by containerd 2.x, which first tries it as a protobuf BootstrapResult and
// must fail to, then falls back to JSON. The options on stdin are validated first.
func TestStartOutput(t *testing.T) {
	addr := "unix:///run/containerd/s/" + strings.Repeat("ab", 32)
	var gotFlags startFlags
	startShim := func(_ context.Context, f startFlags, _ string) (string, error) {
		gotFlags = f
		return addr, nil
	}
	opts, err := proto.Marshal(mustAny(t, &options.Options{LogLevel: "debug"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := start(context.Background(), startFlags{namespace: "default", id: "c1"}, bytes.NewReader(opts), &out, startShim); err != nil {
		t.Fatal(err)
	}
	if !gotFlags.debug {
		t.Error("log_level=debug in the options did not make the shim debug")
	}
	var r bootapi.BootstrapResult
	if err := proto.Unmarshal(out.Bytes(), &r); err == nil {
		t.Fatalf("start output parses as a protobuf BootstrapResult (%v): containerd 2.x would take it as such", &r)
	}
	var doc struct {
		Version  int
		Address  string
		Protocol string
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Version != 2 || doc.Protocol != "ttrpc" || doc.Address != addr {
		t.Errorf("start output %s: %+v %v", out.Bytes(), doc, err)
	}

	bad, _ := proto.Marshal(mustAny(t, &options.Options{LogLevel: "loud"}))
	if err := start(context.Background(), startFlags{namespace: "default", id: "c1"}, bytes.NewReader(bad), &out, startShim); err == nil {
		t.Error("start accepted invalid options")
	}
	if err := start(context.Background(), startFlags{id: "c1"}, bytes.NewReader(nil), &out, startShim); err == nil {
		t.Error("start accepted no namespace")
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	a, err := typeurl.MarshalAnyToProto(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestBootstrapVersion(t *testing.T) {
	for in, want := range map[string]int{"": 2, "2": 2, "3": 3, "4": 3, "x": 2} {
		if got := bootstrapVersion(in); got != want {
			t.Errorf("bootstrapVersion(%q) = %d, want %d", in, got, want)
		}
	}
}
