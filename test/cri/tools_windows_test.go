//go:build windows

package cri

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The Windows tools that Kubernetes' Windows e2e tests run as workloads, here as the test image
// carries them: stand-ins (test/workload, "Stand-ins for Windows tools") at the tools' Windows
// paths, found by the bare names a pod spec uses through the emulated CreateProcess's search
// (System32, then the image's PATH).

// toolConfig is an app container of the test image running command as a pod spec gives it.
func toolConfig(name string, command ...string) *runtimeapi.ContainerConfig {
	cfg := containerConfig(name)
	cfg.Command = command
	return cfg
}

// runToEnd runs a container of command in pod to its end and returns its status and CRI log.
func runToEnd(t *testing.T, n *node, pod string, podCfg *runtimeapi.PodSandboxConfig, name string, command ...string) (*runtimeapi.ContainerStatus, string) {
	t.Helper()
	cfg := toolConfig(name, command...)
	s := waitExited(t, n, startContainer(t, n, pod, podCfg, cfg))
	log, err := os.ReadFile(filepath.Join(podCfg.LogDirectory, cfg.LogPath))
	if err != nil {
		t.Fatal(err)
	}
	return s, string(log)
}

// logLines are the lines of a CRI log of one stream ("stdout" or "stderr"), without the
// timestamp, stream and tag.
func logLines(log, stream string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) == 4 && f[1] == stream {
			out = append(out, f[3])
		}
	}
	return out
}

// TestToolsCmd: cmd /c with an operator and exit N, as Kubernetes' Windows tests write them.
func TestToolsCmd(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-tools-cmd")
	s, log := runToEnd(t, n, pod, podCfg, "echo-exit", "cmd", "/c", "echo hello & exit 3")
	// cmd's echo keeps the space before "&".
	if s.GetExitCode() != 3 || s.GetReason() != "Error" || !contains(logLines(log, "stdout"), "hello ") {
		t.Fatalf("cmd /c \"echo hello & exit 3\": exit code %d, reason %q, log %q; want 3, Error and the line %q", s.GetExitCode(), s.GetReason(), log, "hello ")
	}
	s, log = runToEnd(t, n, pod, podCfg, "files", "cmd", "/Q", "/c",
		`mkdir C:\data\sub && echo written> C:\data\f.txt && type C:\data\f.txt && dir /b C:\data && set USERNAME && type C:\nothere.txt`)
	// The space before "&&" stays with the echo, redirected or not, as in cmd.
	want := []string{"written ", "f.txt", "sub", `USERNAME=ContainerAdministrator`}
	if got := logLines(log, "stdout"); s.GetExitCode() != 1 || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("cmd file commands: exit code %d, stdout %q; want 1 (type of a missing file) and %q", s.GetExitCode(), got, want)
	}
	if got := logLines(log, "stderr"); !contains(got, "The system cannot find the file specified.") {
		t.Fatalf("cmd type of a missing file: stderr %q", got)
	}
	// An exec probe as kubelet runs one, in a running container.
	id := startContainer(t, n, pod, podCfg, containerConfig("probed", "sleep", "600"))
	stdout, _, err := n.rt.ExecSync(ctx(t), id, []string{"cmd", "/c", "echo probe ok&& exit 0"}, time.Minute)
	if err != nil || string(stdout) != "probe ok\r\n" {
		t.Fatalf("ExecSync cmd /c: stdout %q, %v; want %q", stdout, err, "probe ok\r\n")
	}
	_, _, err = n.rt.ExecSync(ctx(t), id, []string{"cmd", "/c", "exit 5"}, time.Minute)
	var exitErr interface{ ExitStatus() int }
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 5 {
		t.Fatalf("ExecSync cmd /c \"exit 5\": %v; want exit status 5", err)
	}
	s, log = runToEnd(t, n, pod, podCfg, "unsupported", "cmd", "/c", "for %i in (a) do echo %i")
	if s.GetExitCode() != 1 || !strings.Contains(log, "stderr F cmd (runhcs stand-in): the internal command FOR is not supported by this stand-in") {
		t.Fatalf("cmd /c for: exit code %d, log %q; want 1 and the stand-in's refusal", s.GetExitCode(), log)
	}
}

// TestToolsPowerShell: powershell -c with $env:NAME and exit N.
func TestToolsPowerShell(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-tools-ps")
	s, log := runToEnd(t, n, pod, podCfg, "env-exit", "powershell", "-c", "echo $env:USERNAME; exit 4")
	if s.GetExitCode() != 4 || !contains(logLines(log, "stdout"), "ContainerAdministrator") {
		t.Fatalf("powershell -c \"echo $env:USERNAME; exit 4\": exit code %d, log %q; want 4 and ContainerAdministrator", s.GetExitCode(), log)
	}
	s, log = runToEnd(t, n, pod, podCfg, "files", "powershell.exe", "-NoProfile", "-Command",
		`$env:GREETING = 'from powershell'; Write-Host $env:GREETING; start-sleep -m 10; cat C:\Windows\System32\drivers\etc\hosts; ls C:\workload`)
	out := logLines(log, "stdout")
	if s.GetExitCode() != 0 || !contains(out, "from powershell") || !contains(out, "127.0.0.1 localhost") || !strings.Contains(log, " workload.exe") {
		t.Fatalf("powershell statements: exit code %d, log %q", s.GetExitCode(), log)
	}
}

// stopRunning stops a container that must still be running, with kubelet's grace period, and
// waits for it to have exited.
func stopRunning(t *testing.T, n *node, id string) {
	t.Helper()
	st, err := n.rt.ContainerStatus(ctx(t), id, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container before the stop: %v, %v; want running", st.GetStatus().GetState(), err)
	}
	if err := n.rt.StopContainer(ctx(t), id, 30); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	waitExited(t, n, id)
}

// TestToolsUntilStopped: the long-running workloads of Kubernetes' tests, a PowerShell
// while($true) loop and ping -t, run until StopContainer stops them.
func TestToolsUntilStopped(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-tools-loop")
	loop := toolConfig("loop", "powershell", "-c", "while($true){echo looping; start-sleep -s 1}")
	id := startContainer(t, n, pod, podCfg, loop)
	logPath := filepath.Join(podCfg.LogDirectory, loop.LogPath)
	waitLog(t, logPath, " stdout F looping\n")
	// A second round shows the loop loops.
	waitCount(t, logPath, " stdout F looping\n", 2)
	stopRunning(t, n, id)

	ping := toolConfig("ping", "ping", "-t", "localhost")
	id = startContainer(t, n, pod, podCfg, ping)
	logPath = filepath.Join(podCfg.LogDirectory, ping.LogPath)
	waitLog(t, logPath, " stdout F Pinging localhost [127.0.0.1] with 32 bytes of data:")
	waitCount(t, logPath, " stdout F Reply from 127.0.0.1: bytes=32 time", 2)
	stopRunning(t, n, id)
}

// waitCount waits until the CRI log holds want at least count times.
func waitCount(t *testing.T, path, want string, count int) {
	t.Helper()
	waitFor(t, path, func(log string) bool { return strings.Count(log, want) >= count }, want)
}

// TestToolsNetwork: ipconfig /all shows the pod's IP, ping answers for a non-administrator
// account too, hostname prints the pod's host name.
func TestToolsNetwork(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-tools-net")
	ip := podIP(t, n, pod)
	s, log := runToEnd(t, n, pod, podCfg, "ipconfig", "ipconfig", "/all")
	want := regexp.MustCompile(`stdout F    IPv4 Address\. \. \. \. \. \. \. \. \. \. \. : ` + regexp.QuoteMeta(ip) + `\(Preferred\)`)
	if s.GetExitCode() != 0 || !want.MatchString(log) || !strings.Contains(log, "stdout F Windows IP Configuration") {
		t.Fatalf("ipconfig /all: exit code %d, log %q; want the pod IP %s", s.GetExitCode(), log, ip)
	}
	// Any account may ping, as on Windows.
	ping := toolConfig("ping-user", "ping", "-n", "1", "localhost")
	ping.Windows.SecurityContext.RunAsUsername = "ContainerUser"
	if st := waitExited(t, n, startContainer(t, n, pod, podCfg, ping)); st.GetExitCode() != 0 {
		b, _ := os.ReadFile(filepath.Join(podCfg.LogDirectory, ping.LogPath))
		t.Fatalf("ping -n 1 localhost as ContainerUser: exit code %d, log %q", st.GetExitCode(), b)
	}
	waitLog(t, filepath.Join(podCfg.LogDirectory, ping.LogPath), " stdout F Reply from 127.0.0.1: bytes=32 time")
	s, log = runToEnd(t, n, pod, podCfg, "hostname", "hostname")
	if got := logLines(log, "stdout"); s.GetExitCode() != 0 || len(got) != 1 || got[0] != podCfg.Hostname {
		t.Fatalf("hostname: exit code %d, stdout %q; want the pod's host name %q", s.GetExitCode(), got, podCfg.Hostname)
	}
}

// TestHostName: a pod's containers are computers named after the pod's host name in both
// isolations: hostname prints it and ipconfig /all shows it as the Host Name. In a Hyper-V pod
// each container is a silo of its own in the utility VM, and hcsshim sends the pod's host name
// as the hosted container's GuestOs.HostName, so the containers there carry the pod's name,
// not the VM's.
func TestHostName(t *testing.T) {
	n := connect(t)
	for _, c := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}} {
		t.Run(c.name, func(t *testing.T) {
			pod, podCfg := runPodWith(t, n, "pod-hostname-"+c.name, c.handler)
			s, log := runToEnd(t, n, pod, podCfg, "hostname", "hostname")
			if got := logLines(log, "stdout"); s.GetExitCode() != 0 || len(got) != 1 || got[0] != podCfg.Hostname {
				t.Errorf("hostname: exit code %d, stdout %q; want the pod's host name %q", s.GetExitCode(), got, podCfg.Hostname)
			}
			s, log = runToEnd(t, n, pod, podCfg, "ipconfig", "ipconfig", "/all")
			if want := "   Host Name . . . . . . . . . . . . : " + podCfg.Hostname; s.GetExitCode() != 0 || !slices.Contains(logLines(log, "stdout"), want) {
				t.Errorf("ipconfig /all: exit code %d, log %q; want the line %q", s.GetExitCode(), log, want)
			}
		})
	}
}

// TestToolsGetProcess: powershell's get-process in a process-isolated container lists that
// container's processes only, as in a Windows server silo: its workload, the exec'd powershell
// itself and the silo's smss (hcsemu's silo init); not the processes of another pod nor the
// node's (containerd, the shims, hcsemu, Wine).
func TestToolsGetProcess(t *testing.T) {
	n := connect(t)
	pod, podCfg := runPod(t, n, "pod-tools-getproc")
	id := startContainer(t, n, pod, podCfg, containerConfig("sleeps", "sleep", "600"))
	other, otherCfg := runPod(t, n, "pod-tools-getproc-other")
	ping := toolConfig("ping", "ping", "-t", "localhost")
	otherID := startContainer(t, n, other, otherCfg, ping)
	waitLog(t, filepath.Join(otherCfg.LogDirectory, ping.LogPath), " stdout F Pinging localhost")

	if got, want := getProcess(t, n, id), []string{"powershell", "smss", "workload"}; !slices.Equal(got, want) {
		t.Errorf("get-process in the pod running workload: %q, want %q", got, want)
	}
	if got, want := getProcess(t, n, otherID), []string{"ping", "powershell", "smss"}; !slices.Equal(got, want) {
		t.Errorf("get-process in the pod running ping: %q, want %q", got, want)
	}
}

// getProcess runs powershell -c get-process in container id and returns the ProcessName
// column, lower-cased, in the order listed (Get-Process sorts by name), checking Windows
// PowerShell's table: every row has an Id, a session and the working set of a live process.
func getProcess(t *testing.T, n *node, id string) []string {
	t.Helper()
	stdout, stderr, err := n.rt.ExecSync(ctx(t), id, []string{"powershell", "-c", "get-process"}, time.Minute)
	if err != nil || len(stderr) != 0 {
		t.Fatalf("ExecSync powershell -c get-process: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	const header = "Handles  NPM(K)    PM(K)      WS(K)     CPU(s)     Id  SI ProcessName"
	lines := strings.Split(string(stdout), "\r\n")
	at := slices.Index(lines, header)
	if at < 0 || at+1 >= len(lines) || !strings.HasPrefix(lines[at+1], "-------  ------") {
		t.Fatalf("get-process: no %q header in %q", header, stdout)
	}
	row := regexp.MustCompile(`^ {0,6}[0-9]* {1,7}0 {1,8}[0-9]+ {1,10}[1-9][0-9]* {1,10}[0-9]+\.[0-9]{2} {1,6}[1-9][0-9]* {1,3}[01] (\S+)$`)
	var names []string
	for _, l := range lines[at+2:] {
		if l == "" {
			break
		}
		m := row.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("get-process: row %q is not Windows PowerShell's (output %q)", l, stdout)
		}
		names = append(names, strings.ToLower(m[1]))
	}
	return names
}
