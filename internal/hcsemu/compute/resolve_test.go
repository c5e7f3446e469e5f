package compute

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/computecore"
)

// newTestVolume makes a folder laid out like a container's C:\ and opens it.
func newTestVolume(t *testing.T, files ...string) *volume {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	v, err := openVolume(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func TestWinToRel(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`C:\`, "", true},
		{`C:\a\b.exe`, "a/b.exe", true},
		{`c:\a\\b\`, "a/b", true},
		{`C:/a/b`, "a/b", true},
		{`\a\b`, "a/b", true},
		{`C:\a\..\..\b`, "b", true}, // cannot climb above C:\
		{`C:\a\.\b`, "a/b", true},
		{`D:\a`, "", false},
		{`C:a`, "", false},
		{`a\b`, "", false},
		{`\\server\share\x`, "", false},
		{`\\?\C:\x`, "", false},
	}
	for _, tt := range tests {
		got, ok := winToRel(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("winToRel(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestResolveExecutable(t *testing.T) {
	v := newTestVolume(t,
		"Windows/System32/cmd.exe",
		"Windows/System32/whoami.exe",
		"Windows/System32/WindowsPowerShell/v1.0/powershell.exe",
		"Tools/Bin/cmd.exe",
		"workload/workload.exe",
		"workload/script.CMD",
		"Tools/Bin/Tool.EXE",
		"app/local.exe",
		"app/both.com",
		"app/both.exe",
		"noext/plain",
	)
	pathEnv := map[string]string{"PATH": `C:\Windows\System32;C:\Windows;C:\workload`}
	tests := []struct {
		name    string
		program string
		workDir string
		env     map[string]string
		want    string // Linux path, "" for not found
	}{
		{"absolute", `C:\workload\workload.exe`, `C:\`, nil, "/workload/workload.exe"},
		{"absolute without extension", `C:\workload\workload`, `C:\`, nil, "/workload/workload.exe"},
		{"absolute, any case", `c:\WORKLOAD\WorkLoad.EXE`, `C:\`, nil, "/workload/workload.exe"},
		{"rooted without drive", `\workload\workload.exe`, `C:\`, nil, "/workload/workload.exe"},
		{"from PATH", "workload.exe", `C:\`, pathEnv, "/workload/workload.exe"},
		{"from PATH, .exe appended", "workload", `C:\`, pathEnv, "/workload/workload.exe"},
		{"PATH name is case-insensitive", "workload", `C:\`, map[string]string{"Path": `C:\workload`}, "/workload/workload.exe"},
		{"system32 without PATH", "cmd", `C:\`, nil, "/Windows/System32/cmd.exe"},
		{"working directory first", "local", `C:\app`, pathEnv, "/app/local.exe"},
		// CreateProcess appends .exe only; PATHEXT is cmd.exe's.
		{"only .exe is appended, not .com", "both", `C:\app`, nil, "/app/both.exe"},
		{"PATHEXT is not CreateProcess's", "both", `C:\app`, map[string]string{"PATHEXT": ".COM"}, "/app/both.exe"},
		{"no .cmd from PATHEXT", "script", `C:\`, pathEnv, ""},
		{"cmd through System32", "cmd", `C:\app`, pathEnv, "/Windows/System32/cmd.exe"},
		{"powershell through PATH", "powershell", `C:\`, map[string]string{"PATH": `C:\Windows\System32;C:\Windows\System32\WindowsPowerShell\v1.0`}, "/Windows/System32/WindowsPowerShell/v1.0/powershell.exe"},
		{"system folders before PATH", "cmd", `C:\`, map[string]string{"PATH": `C:\Tools\Bin`}, "/Windows/System32/cmd.exe"},
		{"case-insensitive directories", "tool", `C:\`, map[string]string{"PATH": `c:\tools\bin`}, "/Tools/Bin/Tool.EXE"},
		{"relative with a directory", `app\local.exe`, `C:\`, nil, "/app/local.exe"},
		{"a name with an extension is taken as is", "plain.exe", `C:\noext`, nil, ""},
		{"no extension appended when it has one", `C:\noext\plain`, `C:\`, nil, ""},
		{"missing", "nothere.exe", `C:\`, pathEnv, ""},
		{"other drive", `D:\workload\workload.exe`, `C:\`, nil, ""},
		{"a directory is not a program", `C:\workload`, `C:\`, nil, ""},
		{"cannot escape the volume", `C:\..\..\workload\workload.exe`, `C:\`, nil, "/workload/workload.exe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.resolveExecutable(tt.program, tt.workDir, tt.env)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("resolved %q to %+v, want ERROR_FILE_NOT_FOUND", tt.program, got)
				}
				if !errors.Is(err, computecore.E_FILE_NOT_FOUND) {
					t.Fatalf("error %v is not ERROR_FILE_NOT_FOUND", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolve %q: %v", tt.program, err)
			}
			if got.LinuxPath != tt.want {
				t.Errorf("resolve %q = %q, want %q", tt.program, got.LinuxPath, tt.want)
			}
		})
	}
}

func TestResolveExecutableNamesTheProgram(t *testing.T) {
	v := newTestVolume(t)
	_, err := v.resolveExecutable(`C:\missing\prog.exe`, `C:\`, nil)
	if err == nil || !errors.Is(err, computecore.E_FILE_NOT_FOUND) {
		t.Fatalf("got %v, want ERROR_FILE_NOT_FOUND", err)
	}
	if want := `C:\\missing\\prog.exe`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

func TestResolveDir(t *testing.T) {
	v := newTestVolume(t, "Users/Public/x.txt")
	if got, err := v.resolveDir(`C:\users\PUBLIC`); err != nil || got != "/Users/Public" {
		t.Errorf("resolveDir = %q, %v; want /Users/Public", got, err)
	}
	if got, err := v.resolveDir(`C:\`); err != nil || got != "/" {
		t.Errorf("resolveDir(C:\\) = %q, %v; want /", got, err)
	}
	if _, err := v.resolveDir(`C:\Users\Public\x.txt`); !errors.Is(err, computecore.E_PATH_NOT_FOUND) {
		t.Errorf("a file as working directory: %v, want ERROR_PATH_NOT_FOUND", err)
	}
	if _, err := v.resolveDir(`C:\nope`); !errors.Is(err, computecore.E_PATH_NOT_FOUND) {
		t.Errorf("a missing working directory: %v, want ERROR_PATH_NOT_FOUND", err)
	}
}
