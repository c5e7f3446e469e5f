package winargs

import (
	"slices"
	"testing"
)

// The detailed cases are in the tests of the packages that use these (hcsemu's
// TestParseCommandLine and FuzzCommandLine, oci's TestCommandLine); this checks the pair.
func TestJoinSplitRoundTrip(t *testing.T) {
	for _, args := range [][]string{
		{"cmd", "/c", "echo hello & exit 3"},
		{"powershell", "-c", `echo $env:USERNAME; exit 4`},
		{"prog", "", "a b", `a"b`, `a\`, `a\\"b`, `"`, `\\`, "tab\there", `C:\Program Files\`},
	} {
		line := Join(args)
		if got := Split(line); !slices.Equal(got, args) {
			t.Errorf("Split(Join(%q)) = Split(%s) = %q", args, line, got)
		}
	}
	if got := Quote("echo hello & exit 3"); got != `"echo hello & exit 3"` {
		t.Errorf("Quote = %s", got)
	}
}
