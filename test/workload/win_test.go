//go:build linux

// The tool stand-ins are Linux programs in the Windows-format test images: they show the Linux
// folders they run in as C:\ paths and start Linux programs, so their tests run on Linux only
// (under Wine, the Windows build of this package has no such folders to translate).

package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/internal/testenv"
)

// runTool runs a stand-in in dir with env and returns its exit code and output.
func runTool(t *testing.T, name string, args []string, dir string, env ...string) (int, string, string) {
	t.Helper()
	f, ok := standIn(name)
	if !ok {
		t.Fatalf("no stand-in for %q", name)
	}
	var stdout, stderr bytes.Buffer
	tl := &tool{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, env: env}
	if dir != "" {
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		defer os.Chdir(wd)
	}
	code := f(args, tl)
	return code, stdout.String(), stderr.String()
}

func TestStandInNames(t *testing.T) {
	for _, n := range []string{"cmd", "CMD.EXE", `C:\Windows\System32\cmd.exe`, "/Windows/System32/cmd.exe", "PowerShell", "powershell.exe", "PING.EXE", "ipconfig", "HOSTNAME.EXE"} {
		if _, ok := standIn(n); !ok {
			t.Errorf("standIn(%q): no stand-in", n)
		}
	}
	for _, n := range []string{"workload", `C:\workload\workload.exe`, "cmd.com", "cmdx"} {
		if _, ok := standIn(n); ok {
			t.Errorf("standIn(%q): a stand-in, want the workload", n)
		}
	}
}

func TestCmd(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Data.txt"), []byte("file content\r\n"), 0o644)
	env := []string{"Path=C:\\Windows\\System32", "GREETING=hi there", "EMPTYISH= "}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string // substring
	}{
		{"echo and exit", []string{"/c", "echo hello & exit 3"}, 3, "hello \r\n", ""},
		// Arguments as kubelet passes them: the shim quotes each into the command line
		// (winargs.Join), and cmd removes the quotes around the text after /c.
		{"quoted whole line", []string{"/c", "echo a&&echo b"}, 0, "a\r\nb\r\n", ""},
		{"words after /c", []string{"/C", "echo", "two words"}, 0, "\"two words\"\r\n", ""},
		{"/Q and /S", []string{"/Q", "/S", "/c", "echo x"}, 0, "x\r\n", ""},
		{"echo alone", []string{"/c", "echo"}, 0, "ECHO is on.\r\n", ""},
		{"echo alone /Q", []string{"/q", "/c", "echo"}, 0, "ECHO is off.\r\n", ""},
		{"echo.", []string{"/c", "echo."}, 0, "\r\n", ""},
		{"exit code", []string{"/c", "exit 42"}, 42, "", ""},
		{"exit /b", []string{"/c", "exit /b 5 & echo no"}, 5, "", ""},
		{"negative exit", []string{"/c", "exit -1"}, -1, "", ""},
		{"variable", []string{"/c", "echo %GREETING%!"}, 0, "hi there!\r\n", ""},
		{"variable name without regard to case", []string{"/c", "echo %greeting%"}, 0, "hi there\r\n", ""},
		{"unset variable stays", []string{"/c", "echo %NOPE% 100%"}, 0, "%NOPE% 100%\r\n", ""},
		{"caret escapes", []string{"/c", "echo a ^& b"}, 0, "a & b\r\n", ""},
		{"quotes keep operators", []string{"/c", "echo", "a & b"}, 0, "\"a & b\"\r\n", ""},
		// A quote inside an argument reaches cmd escaped for the C runtime (\"), which cmd does
		// not understand: real cmd prints the backslashes too.
		{"escaped quotes", []string{"/c", `echo "a & b"`}, 0, `\"a & b\"` + "\r\n", ""},
		{"&& after failure", []string{"/c", "type nothere.txt && echo no"}, 1, "", "cannot find the file"},
		{"|| after failure", []string{"/c", "type nothere.txt || echo recovered"}, 1, "recovered\r\n", ""},
		// echo prints the space before an operator, as cmd's does.
		{"|| after success", []string{"/c", "echo ok || echo no"}, 0, "ok \r\n", ""},
		{"& always", []string{"/c", "type nothere.txt & echo still"}, 1, "still\r\n", ""},
		{"type", []string{"/c", "type data.txt"}, 0, "file content\r\n", ""},
		{"set one", []string{"/c", "set GREETING"}, 0, "GREETING=hi there\r\n", ""},
		{"set and read", []string{"/c", "set NEW=value& echo %NEW%"}, 0, "%NEW%\r\n", ""}, // expanded before it ran, as cmd does
		{"set and list", []string{"/c", "set NEW=value& set new"}, 0, "NEW=value\r\n", ""},
		{"set missing", []string{"/c", "set NOPE"}, 1, "", "Environment variable NOPE not defined"},
		{"mkdir", []string{"/c", `mkdir a\b & dir /b a`}, 0, "b\r\n", ""},
		{"mkdir existing", []string{"/c", "md Data.txt"}, 1, "", "A subdirectory or file Data.txt already exists."},
		{"redirect", []string{"/c", "echo to file> out.txt & type out.txt"}, 0, "to file \r\n", ""},
		{"append", []string{"/c", "echo one>app.txt & echo two>>app.txt & type app.txt"}, 0, "one \r\ntwo \r\n", ""},
		{"stderr redirect", []string{"/c", "type nothere.txt 2>&1"}, 1, "The system cannot find the file specified.\r\n", ""},
		{"not a program", []string{"/c", "nothere.exe"}, 9009, "", "'nothere.exe' is not recognized as an internal or external command"},
		{"unsupported internal", []string{"/c", "for %i in (a) do echo %i"}, 1, "", "cmd (runhcs stand-in): the internal command FOR is not supported by this stand-in"},
		{"unsupported pipe", []string{"/c", "echo a | echo b"}, 1, "", "a pipe (|) is not supported"},
		{"unsupported /k", []string{"/k", "echo a"}, 1, "", "the switch /k is not supported"},
		{"interactive", nil, 1, "", "an interactive cmd"},
		{"nothing after /c", []string{"/c"}, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runTool(t, "cmd.exe", tt.args, dir, env...)
			if code != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("cmd %q: code %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tt.args, code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestCmdDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 1234), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	code, stdout, _ := runTool(t, "cmd", []string{"/c", "dir"}, dir)
	if code != 0 || !strings.Contains(stdout, " Directory of C:") || !strings.Contains(stdout, "    <DIR>          sub\r\n") ||
		!strings.Contains(stdout, "             1,234 big.bin\r\n") || !strings.Contains(stdout, "1 File(s)          1,234 bytes") {
		t.Errorf("dir: %d\n%s", code, stdout)
	}
	if code, _, stderr := runTool(t, "cmd", []string{"/c", "dir nothere"}, dir); code != 1 || stderr != "File Not Found\r\n" {
		t.Errorf("dir nothere: %d %q", code, stderr)
	}
}

// TestCmdRunsPrograms: cmd finds a program through PATH and PATHEXT, passes its arguments as
// the C runtime splits them, and takes its exit code.
func TestCmdRunsPrograms(t *testing.T) {
	bin := t.TempDir()
	exe := filepath.Join(bin, "workload.exe")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := []string{"PATH=C:" + strings.ReplaceAll(bin, "/", `\`), "PATHEXT=.COM;.EXE"}
	code, stdout, stderr := runTool(t, "cmd", []string{"/c", `workload args a b & workload exit 7`}, t.TempDir(), env...)
	if code != 7 || stdout != "\"a\"\n\"b\"\n" {
		t.Errorf("code %d, stdout %q, stderr %q; want 7 and the two arguments", code, stdout, stderr)
	}
	code, stdout, _ = runTool(t, "powershell", []string{"-c", `WORKLOAD.EXE echo "x y"; exit $LASTEXITCODE`}, t.TempDir(), env...)
	if code != 0 || stdout != "x y\n" {
		t.Errorf("powershell running a program: code %d, stdout %q", code, stdout)
	}
	code, _, _ = runTool(t, "powershell", []string{"-c", `workload exit 3; exit $LASTEXITCODE`}, t.TempDir(), env...)
	if code != 3 {
		t.Errorf("powershell exit $LASTEXITCODE: %d, want 3", code)
	}
	code, _, _ = runTool(t, "powershell", []string{"-c", `workload exit 3`}, t.TempDir(), env...)
	if code != 1 {
		t.Errorf("powershell with a failed last program: %d, want 1", code)
	}
}

func TestPowerShell(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("l1\nl2\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	env := []string{"USERNAME=ContainerAdministrator", "Greeting=hi"}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"echo env and exit", []string{"-c", "echo $env:USERNAME; exit 4"}, 4, "ContainerAdministrator\r\n", ""},
		{"-Command and options", []string{"-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass", "-Command", "echo", "a", "b"}, 0, "a\r\nb\r\n", ""},
		{"text without -Command", []string{"echo x"}, 0, "x\r\n", ""},
		{"strings", []string{"-c", `echo 'it''s $env:USERNAME' "user: $env:username, ${env:Greeting}` + "`t!\""}, 0, "it's $env:USERNAME\r\nuser: ContainerAdministrator, hi\t!\r\n", ""},
		{"bare word expands", []string{"-c", "echo pre-$env:Greeting"}, 0, "pre-hi\r\n", ""},
		{"unset variable", []string{"-c", "echo $env:NOPE; echo end"}, 0, "end\r\n", ""},
		{"expression statement", []string{"-c", "$env:Greeting"}, 0, "hi\r\n", ""},
		{"assign", []string{"-c", "$env:X = 'v'; Write-Host got $env:X"}, 0, "got v\r\n", ""},
		{"write-output lines", []string{"-c", "Write-Output one two"}, 0, "one\r\ntwo\r\n", ""},
		{"start-sleep", []string{"-c", "start-sleep -m 1; Start-Sleep -Seconds 0; sleep 0; echo done"}, 0, "done\r\n", ""},
		{"while with break", []string{"-c", "while($true){echo tick; break}; echo after"}, 0, "tick\r\nafter\r\n", ""},
		{"exit inside while", []string{"-c", "while ($true) { echo once; exit 9 }"}, 9, "once\r\n", ""},
		{"cat", []string{"-c", "cat f.txt"}, 0, "l1\r\nl2\r\n", ""},
		{"cat missing", []string{"-c", "cat nope.txt"}, 1, "", "Cannot find path 'nope.txt' because it does not exist."},
		{"failed then ok", []string{"-c", "cat nope.txt; echo ok"}, 0, "ok\r\n", "Cannot find path"},
		{"exit no code", []string{"-c", "exit"}, 0, "", ""},
		{"unknown program", []string{"-c", "nothere"}, 1, "", "The term 'nothere' is not recognized"},
		{"unsupported cmdlet", []string{"-c", "Get-Service; echo no"}, 1, "", "powershell (runhcs stand-in): the cmdlet Get-Service is not supported by this stand-in"},
		{"unsupported loop", []string{"-c", "for($i=0;$i -lt 3;$i++){}"}, 1, "", "the for statement is not supported"},
		{"unsupported condition", []string{"-c", "while($false){}"}, 1, "", "a while condition other than $true is not supported"},
		{"unsupported pipeline", []string{"-c", "echo a | out-null"}, 1, "", "a pipeline (|) is not supported"},
		{"unsupported variable", []string{"-c", "echo $x"}, 1, "", "the variable $x is not supported"},
		{"unsupported -File", []string{"-File", "x.ps1"}, 1, "", "the parameter -File is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runTool(t, "powershell.exe", tt.args, dir, env...)
			if code != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("powershell %q: code %d, stdout %q, stderr %q; want %d, %q, stderr with %q", tt.args, code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	code, stdout, _ := runTool(t, "powershell", []string{"-c", "ls"}, dir)
	if code != 0 || !strings.Contains(stdout, "    Directory: C:") || !strings.Contains(stdout, "d-----") || !strings.Contains(stdout, " sub\r\n") || !strings.Contains(stdout, "6 f.txt\r\n") {
		t.Errorf("ls: %d\n%s", code, stdout)
	}
	code, stdout, _ = runTool(t, "powershell", []string{"-c", "get-process"}, dir)
	const header = "\r\nHandles  NPM(K)    PM(K)      WS(K)     CPU(s)     Id  SI ProcessName\r\n" +
		"-------  ------    -----      -----     ------     --  -- -----------\r\n"
	if code != 0 || !strings.HasPrefix(stdout, header) {
		t.Fatalf("get-process: %d\n%s", code, stdout)
	}
	// The stand-in runs in this test's process: its row has its PID and name, open
	// descriptors (its own, so readable), a working set, Windows PowerShell's widths.
	row := regexp.MustCompile(`\r\n {0,6}[1-9][0-9]* {7}0 {1,8}[0-9]+ {1,10}[1-9][0-9]* {1,10}[0-9]+\.[0-9]{2} {1,6}` +
		strconv.Itoa(os.Getpid()) + ` {1,3}[01] ` + regexp.QuoteMeta(filepath.Base(os.Args[0])) + `\r\n`)
	if !row.MatchString(stdout) {
		t.Errorf("get-process: no row of this process (%d) in\n%s", os.Getpid(), stdout)
	}
}

func TestNetworkTools(t *testing.T) {
	h, _ := os.Hostname()
	if code, stdout, _ := runTool(t, "hostname", nil, ""); code != 0 || stdout != h+"\r\n" {
		t.Errorf("hostname: %d %q, want %q", code, stdout, h)
	}
	if code, _, stderr := runTool(t, "hostname", []string{"x"}, ""); code != 1 || !strings.Contains(stderr, "not supported") {
		t.Errorf("hostname x: %d %q", code, stderr)
	}
	code, stdout, _ := runTool(t, "ipconfig", []string{"/all"}, "")
	if code != 0 || !strings.Contains(stdout, "Windows IP Configuration") || !strings.Contains(stdout, "   Host Name . . . . . . . . . . . . : "+h+"\r\n") {
		t.Errorf("ipconfig /all: %d\n%s", code, stdout)
	}
	if code, _, stderr := runTool(t, "ipconfig", []string{"/release"}, ""); code != 1 || !strings.Contains(stderr, "ipconfig /release is not supported") {
		t.Errorf("ipconfig /release: %d %q", code, stderr)
	}
	if code, stdout, _ := runTool(t, "ping", []string{"-n", "1", "nothere.invalid"}, ""); code != 1 || !strings.Contains(stdout, "could not find host nothere.invalid") {
		t.Errorf("ping of an unknown name: %d %q", code, stdout)
	}
	if code, _, stderr := runTool(t, "ping", []string{"-a", "localhost"}, ""); code != 1 || !strings.Contains(stderr, "the option -a is not supported") {
		t.Errorf("ping -a: %d %q", code, stderr)
	}
}

// TestIpconfigDNS: ipconfig /all shows the DNS settings hcsemu wrote in C:\etc\resolv.conf in
// Windows' format: the suffix search list, and on the adapter whose MAC the file names its
// connection-specific suffix and its servers, the second one on a continuation line; an adapter
// the file does not name has an empty suffix and no servers. Plain ipconfig shows the suffix
// only.
func TestIpconfigDNS(t *testing.T) {
	var ifc *net.Interface
	ifaces, _ := net.Interfaces()
	for i, c := range ifaces {
		if c.Flags&net.FlagLoopback == 0 && c.Flags&net.FlagUp != 0 && len(c.HardwareAddr) == 6 {
			ifc = &ifaces[i]
			break
		}
	}
	if ifc == nil {
		t.Fatal("this machine has no network interface that is up, besides loopback, to show the settings on")
	}
	mac := strings.ToUpper(strings.ReplaceAll(ifc.HardwareAddr.String(), ":", "-"))
	dir := t.TempDir()
	f := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(f, []byte("# C:\\etc\\resolv.conf: written by hcsemu\n"+
		"# hcsemu-adapter "+mac+" suffix=google.com servers=10.10.10.10,10.10.10.11\n"+
		"nameserver 10.10.10.10\nnameserver 10.10.10.11\nsearch google.com\noptions ndots:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := resolvConfFile
	resolvConfFile = f
	t.Cleanup(func() { resolvConfFile = old })

	code, stdout, _ := runTool(t, "ipconfig", []string{"/all"}, "")
	adapter := "Ethernet adapter " + ifc.Name + ":\r\n\r\n   Connection-specific DNS Suffix  . : google.com\r\n"
	servers := "   DNS Servers . . . . . . . . . . . : 10.10.10.10\r\n" +
		"                                       10.10.10.11\r\n"
	if code != 0 || !strings.Contains(stdout, "   DNS Suffix Search List. . . . . . : google.com\r\n\r\n") ||
		!strings.Contains(stdout, adapter) || !strings.Contains(stdout, servers) {
		t.Errorf("ipconfig /all: %d\n%s\nwant %q, %q and the search list", code, stdout, adapter, servers)
	}
	// The servers come after the adapter's addresses, before the next adapter.
	at := strings.Index(stdout, adapter)
	section := stdout[at:]
	if end := strings.Index(section[len(adapter):], "Ethernet adapter "); end >= 0 {
		section = section[:len(adapter)+end]
	}
	if !strings.Contains(section, servers) {
		t.Errorf("the DNS servers are not in %s's section:\n%s", ifc.Name, section)
	}
	code, stdout, _ = runTool(t, "ipconfig", nil, "")
	if code != 0 || !strings.Contains(stdout, adapter) || strings.Contains(stdout, "DNS Servers") || strings.Contains(stdout, "Search List") {
		t.Errorf("ipconfig: %d\n%s\nwant the suffix only", code, stdout)
	}
	// Another adapter (the MAC changed): no settings on it, and none invented.
	os.WriteFile(f, []byte("# hcsemu-adapter 00-15-5D-00-00-01 suffix=google.com servers=10.10.10.10\nnameserver 10.10.10.10\n"), 0o644)
	code, stdout, _ = runTool(t, "ipconfig", []string{"/all"}, "")
	if code != 0 || !strings.Contains(stdout, "Ethernet adapter "+ifc.Name+":\r\n\r\n   Connection-specific DNS Suffix  . : \r\n") || strings.Contains(stdout, "DNS Servers") {
		t.Errorf("ipconfig /all with the settings of another adapter: %d\n%s", code, stdout)
	}
}

// TestPing pings the loopback address: a raw ICMP socket needs CAP_NET_RAW (root here), as
// under hcsemu it has it as ContainerAdministrator.
func TestPing(t *testing.T) {
	testenv.RequireRoot(t, "a raw ICMP socket")
	code, stdout, stderr := runTool(t, "PING.EXE", []string{"-n", "2", "localhost"}, "")
	if code != 0 || !strings.HasPrefix(stdout, "\r\nPinging localhost [127.0.0.1] with 32 bytes of data:\r\nReply from 127.0.0.1: bytes=32 time") ||
		!strings.Contains(stdout, "Packets: Sent = 2, Received = 2, Lost = 0 (0% loss),") {
		t.Errorf("ping -n 2 localhost: %d\n%s\nstderr: %s", code, stdout, stderr)
	}
}
