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
// version ≤ 2) and as version 3 by containerd 2.x, which first tries it as a protobuf
// BootstrapResult and must fail to, then falls back to JSON. The version is asked of containerd
// at the -address start was given. The options on stdin are validated first.
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
	var asked string
	ask := func(version string) versionFunc {
		return func(_ context.Context, address string) string { asked = address; return version }
	}
	var out bytes.Buffer
	if err := start(context.Background(), startFlags{namespace: "default", id: "c1", address: "/run/containerd/containerd.sock"}, bytes.NewReader(opts), &out, startShim, ask("1.7.35")); err != nil {
		t.Fatal(err)
	}
	if asked != "/run/containerd/containerd.sock" {
		t.Errorf("start asked %q for containerd's version, want its -address", asked)
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
		t.Errorf("start output under containerd 1.7 %s: %+v %v", out.Bytes(), doc, err)
	}
	out.Reset()
	if err := start(context.Background(), startFlags{namespace: "default", id: "c1"}, bytes.NewReader(opts), &out, startShim, ask("v2.4.2")); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(out.Bytes(), &r); err == nil {
		t.Fatalf("start output parses as a protobuf BootstrapResult (%v): containerd 2.x would take it as such", &r)
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Version != 3 || doc.Protocol != "ttrpc" || doc.Address != addr {
		t.Errorf("start output under containerd 2.4.2 %s: %+v %v", out.Bytes(), doc, err)
	}

	bad, _ := proto.Marshal(mustAny(t, &options.Options{LogLevel: "loud"}))
	if err := start(context.Background(), startFlags{namespace: "default", id: "c1"}, bytes.NewReader(bad), &out, startShim, ask("")); err == nil {
		t.Error("start accepted invalid options")
	}
	if err := start(context.Background(), startFlags{id: "c1"}, bytes.NewReader(nil), &out, startShim, ask("")); err == nil {
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

// TestBootstrapVersion: 3 under containerd 2.x (as its version service spells it with or without
// the v of a release build's ldflags), 2 under 1.7 or when containerd did not answer; a
// MAX_SHIM_VERSION of 3 or more says 3 on its own.
func TestBootstrapVersion(t *testing.T) {
	for _, c := range []struct {
		max, containerd string
		want            int
	}{
		{"2", "v2.4.2", 3}, {"2", "2.4.2+unknown", 3}, {"2", "v3.0.0", 3}, {"2", "v2.4.0-beta.0-70-g301026e58", 3},
		{"2", "v1.7.35", 2}, {"2", "1.7.35+unknown", 2}, {"2", "", 2}, {"", "", 2}, {"2", "x", 2}, {"2", "v", 2},
		{"3", "", 3}, {"4", "v1.7.35", 3}, {"x", "", 2},
	} {
		if got := bootstrapVersion(c.max, c.containerd); got != c.want {
			t.Errorf("bootstrapVersion(%q, %q) = %d, want %d", c.max, c.containerd, got, c.want)
		}
	}
}
