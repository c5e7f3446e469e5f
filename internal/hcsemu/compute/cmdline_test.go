package compute

import (
	"slices"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/oci"
)

func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		want []string
	}{
		{"empty", "", nil},
		{"only whitespace", " \t ", nil},
		{"program only", `C:\workload\workload.exe`, []string{`C:\workload\workload.exe`}},
		{"words", "prog a b  c", []string{"prog", "a", "b", "c"}},
		{"tabs separate", "prog\ta\t\tb", []string{"prog", "a", "b"}},
		{"trailing whitespace", "prog a ", []string{"prog", "a"}},
		{"quoted program with spaces", `"C:\Program Files\x.exe" a`, []string{`C:\Program Files\x.exe`, "a"}},
		{"program backslashes are literal", `"C:\dir\\" a`, []string{`C:\dir\\`, "a"}},
		{"unquoted program keeps quotes in the middle", `pro"g a`, []string{`pro"g`, "a"}},
		{"program ends at its closing quote", `"a"b c`, []string{"a", "b", "c"}},
		{"leading space gives an empty program", ` a b`, []string{"", "a", "b"}},
		// The examples of the CommandLineToArgvW / "Parsing C++ command-line arguments" reference.
		{"ms: quoted", `"abc" d e`, []string{"abc", "d", "e"}},
		{"ms: backslashes alone", `prog a\\\b d"e f"g h`, []string{"prog", `a\\\b`, "de fg", "h"}},
		{"ms: odd backslashes before quote", `prog a\\\"b c d`, []string{"prog", `a\"b`, "c", "d"}},
		{"ms: even backslashes before quote", `prog a\\\\"b c" d e`, []string{"prog", `a\\b c`, "d", "e"}},
		{"empty argument", `prog "" b`, []string{"prog", "", "b"}},
		{"quoted space", `prog "a b"`, []string{"prog", "a b"}},
		{"quote in the middle", `prog a"b c"d`, []string{"prog", "ab cd"}},
		{"escaped quote", `prog \"a\"`, []string{"prog", `"a"`}},
		{"trailing backslash", `prog a\`, []string{"prog", `a\`}},
		{"trailing backslashes in quotes", `prog "a\\" b`, []string{"prog", `a\`, "b"}},
		// Pre-2008 rule: "" inside quotes is a literal quote and ends the quoted part.
		{"double quote inside quotes", `prog "a""b c"`, []string{"prog", `a"b`, "c"}},
		{"double quote ends quoting", `prog a"b"" c d`, []string{"prog", `ab"`, "c", "d"}},
		{"unterminated quote", `prog "a b`, []string{"prog", "a b"}},
		{"windows path argument", `cmd /c C:\dir\file.txt`, []string{"cmd", "/c", `C:\dir\file.txt`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseCommandLine(tt.cmd)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseCommandLine(%q) = %q, want %q", tt.cmd, got, tt.want)
			}
		})
	}
}

// TestCommandLineRoundTrip checks the parser against the encoder the shim uses to write
// ProcessParameters.CommandLine: what the shim writes, the emulator must split back.
func TestCommandLineRoundTrip(t *testing.T) {
	args := []string{"prog", "", "a b", `a"b`, `a\`, `a\\"b`, `"`, `\\`, "tab\there", `C:\Program Files\`}
	if got := ParseCommandLine(oci.CommandLine(args)); !slices.Equal(got, args) {
		t.Fatalf("round trip: got %q, want %q", got, args)
	}
}

// FuzzCommandLine checks that parsing never panics, that arguments never contain the
// separators they were split on unless quoted, and that quoting what was parsed and parsing
// it again gives the same arguments.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{`prog a b`, `"C:\x y\z.exe" "a b" c\"d`, `p a\\\\"b c" d`, `p "a""b"`, `p \\\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if strings.ContainsRune(cmd, 0) {
			return
		}
		args := ParseCommandLine(cmd)
		if strings.TrimLeft(cmd, " \t") != "" && len(args) == 0 {
			t.Fatalf("ParseCommandLine(%q) returned no arguments", cmd)
		}
		if len(args) == 0 {
			return
		}
		rest := args[1:]
		again := ParseCommandLine(oci.CommandLine(append([]string{"prog"}, rest...)))
		if !slices.Equal(again[1:], rest) {
			t.Fatalf("ParseCommandLine(%q) = %q; quoted again and parsed: %q", cmd, rest, again[1:])
		}
	})
}
