package oci

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestCheckUTF16(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      string // "" : accepted; else the error names it
	}{
		{"plain", `{"process":{"args":["a","b"],"env":["A=1"]}}`, ""},
		{"pair of escapes", `{"process":{"args":["\ud83d\ude00"]}}`, ""},
		{"raw emoji", "{\"process\":{\"args\":[\"\xf0\x9f\x98\x80\"]}}", ""},
		{"other escapes", `{"process":{"args":["\"\\\n\u00e9"]}}`, ""},
		{"not JSON passes to the decoder", `{"process":`, ""},
		{"invalid byte in an arg", "{\"process\":{\"args\":[\"ok\",\"a\xffb\"]}}", "process.args[1]"},
		{"lone high surrogate in env", `{"process":{"env":["A=1","B=\ud800x"]}}`, "process.env[1]"},
		{"lone low surrogate in cwd", `{"process":{"cwd":"C:\\\udc00"}}`, "process.cwd"},
		{"high then not low", `{"process":{"args":["\ud800\u0041"]}}`, "process.args[0]"},
		{"in an annotation key", "{\"annotations\":{\"k\xfe\":\"v\"}}", "a key of annotations"},
		{"in an annotation value", `{"annotations":{"io.x":"\udfff"}}`, `annotations["io.x"]`},
		{"after nested values", `{"a":[{"b":[1,2]},{"c":"x"}],"process":{"args":["\ud800"]}}`, "process.args[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckUTF16([]byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want an invalid-argument error naming %s", err, tt.want)
			}
		})
	}
}

func TestProcessParametersWindowsStrings(t *testing.T) {
	big := "BIG=" + strings.Repeat("x", MaxEnvVariable-4)
	for _, tt := range []struct {
		name string
		p    specs.Process
		want string
	}{
		{"largest variable", specs.Process{Args: []string{"a"}, Env: []string{big}}, ""},
		{"variable too large", specs.Process{Args: []string{"a"}, Env: []string{"A=1", big + "x"}}, "process.env[1] (BIG)"},
		{"astral characters count twice", specs.Process{Args: []string{"a"}, Env: []string{"E=" + strings.Repeat("\U0001F600", MaxEnvVariable/2)}}, "process.env[0] (E)"},
		{"arg not UTF-8", specs.Process{Args: []string{"a", "b\xff"}}, "process.args[1]"},
		{"env not UTF-8", specs.Process{Args: []string{"a"}, Env: []string{"A=\xc3"}}, "process.env[0]"},
		{"cwd not UTF-8", specs.Process{Args: []string{"a"}, Cwd: "C:\\\xed\xa0\x80"}, "process.cwd"},
		{"NUL in an arg", specs.Process{Args: []string{"a\x00b"}}, "process.args[0]"},
		{"NUL in the command line", specs.Process{CommandLine: "a\x00"}, "process.commandLine"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ProcessParameters(&tt.p, Stdio{})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want an invalid-argument error naming %s", err, tt.want)
			}
		})
	}
}
