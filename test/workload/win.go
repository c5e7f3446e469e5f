package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Stand-ins for the Windows tools that Kubernetes' Windows tests run as workloads. The test
// images install this binary again under each tool's name (test/image ToolPaths), and main
// dispatches on the name it was started as, as a multi-call binary: these are Linux programs
// that parse and answer like the real tools for the subset the tests use, and say so for
// anything else ("… is not supported by this stand-in", exit code 1). They are not Windows.

// standIns maps a tool's name (lower case, without ".exe") to its entry point. Each takes the
// arguments after the program name, as the C runtime splits a Windows command line.
var standIns = map[string]func(args []string, t *tool) int{
	"cmd":        cmdMain,
	"powershell": psMain,
	"ping":       pingMain,
	"ipconfig":   ipconfigMain,
	"hostname":   hostnameMain,
}

// standIn returns the stand-in argv0 names, if any: the base name of a Windows or Linux path,
// without regard to case, with or without ".exe" (CreateProcess runs "CMD.EXE", "cmd" and
// "C:\Windows\System32\cmd.exe" alike).
func standIn(argv0 string) (func([]string, *tool) int, bool) {
	name := strings.ToLower(argv0[strings.LastIndexAny(argv0, `\/`)+1:])
	f, ok := standIns[strings.TrimSuffix(name, ".exe")]
	return f, ok
}

// tool is what a stand-in runs with: its streams and its environment, which the shells change
// (set, $env:X = …) and pass to the programs they start.
type tool struct {
	name           string // "cmd", for messages
	stdin          io.Reader
	stdout, stderr io.Writer
	env            []string
}

func newTool(name string) *tool {
	return &tool{name: name, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, env: os.Environ()}
}

// unsupported reports something outside the stand-in's subset and returns its exit code, 1.
func (t *tool) unsupported(what string) int {
	fmt.Fprintf(t.stderr, "%s (runhcs stand-in): %s is not supported by this stand-in\r\n", t.name, what)
	return 1
}

// getenv finds a variable without regard to the case of its name, as Windows does.
func (t *tool) getenv(name string) (string, bool) {
	for _, kv := range t.env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// setenv sets (or with del, removes) a variable, replacing one whose name differs only in case.
func (t *tool) setenv(name, value string, del bool) {
	out := t.env[:0:0]
	for _, kv := range t.env {
		if k, _, _ := strings.Cut(kv, "="); !strings.EqualFold(k, name) {
			out = append(out, kv)
		}
	}
	if !del {
		out = append(out, name+"="+value)
	}
	t.env = out
}

// sortedEnv is the environment as cmd's set prints it: sorted by name without regard to case.
func (t *tool) sortedEnv() []string {
	env := append([]string(nil), t.env...)
	sort.Slice(env, func(i, j int) bool { return strings.ToLower(env[i]) < strings.ToLower(env[j]) })
	return env
}

// findFold finds a path (as this build opens it, after hostPath) without regard to case, as
// NTFS does; this build's file system may be case-sensitive. It returns the path as spelled on
// disk.
func findFold(p string) (string, os.FileInfo, bool) {
	if fi, err := os.Stat(p); err == nil {
		return p, fi, true
	}
	if windowsPaths {
		return "", nil, false
	}
	dir, base := filepath.Split(filepath.Clean(p))
	if base == "" {
		return "", nil, false
	}
	if dir == "" {
		dir = "."
	}
	d, _, ok := findFold(filepath.Clean(dir))
	if !ok {
		return "", nil, false
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		return "", nil, false
	}
	for _, e := range entries {
		if strings.EqualFold(e.Name(), base) {
			full := filepath.Join(d, e.Name())
			if fi, err := os.Stat(full); err == nil {
				return full, fi, true
			}
		}
	}
	return "", nil, false
}

// winPath is a path of this build as the Windows program shows it: under hcsemu the chroot's
// root is C:\.
func winPath(p string) string {
	if windowsPaths {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return `C:` + strings.ReplaceAll(p, "/", `\`)
}

// findProgram looks a command's program up as cmd.exe and PowerShell do: a name with a folder
// part as given, else the current folder and then each folder of PATH; a name without an
// extension is tried with each extension of PATHEXT (Microsoft's cmd documentation, "Command
// search sequence"; PowerShell's about_Command_Precedence).
func (t *tool) findProgram(name string) (string, bool) {
	exts := []string{""}
	if base := name[strings.LastIndexAny(name, `\/:`)+1:]; !strings.Contains(base, ".") {
		pe, ok := t.getenv("PATHEXT")
		if !ok || pe == "" {
			pe = ".COM;.EXE;.BAT;.CMD"
		}
		exts = strings.Split(pe, ";")
	}
	dirs := []string{""}
	if !strings.ContainsAny(name, `\/:`) {
		dirs = []string{"."}
		if p, ok := t.getenv("PATH"); ok {
			for _, d := range strings.Split(p, ";") {
				if d = strings.Trim(strings.TrimSpace(d), `"`); d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	for _, d := range dirs {
		for _, ext := range exts {
			p := hostPath(name + strings.TrimSpace(ext))
			if d != "" {
				p = filepath.Join(hostPath(d), p)
			}
			if found, fi, ok := findFold(p); ok && fi.Mode().IsRegular() {
				return found, true
			}
		}
	}
	return "", false
}

// runProgram runs a program found with findProgram with argv (argv[0] as the command named it)
// in the tool's environment and returns its exit code.
func (t *tool) runProgram(path string, argv []string, stdout, stderr io.Writer) (int, error) {
	c := &exec.Cmd{Path: path, Args: argv, Env: t.env, Stdin: t.stdin, Stdout: stdout, Stderr: stderr}
	err := c.Run()
	if err != nil && c.ProcessState == nil {
		return 0, err
	}
	return c.ProcessState.ExitCode(), nil
}
