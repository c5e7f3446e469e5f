package compute

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// TestHelperClient is not a test: TestDaemonOutOfProcess runs the test binary again with
// HCSEMU_TEST_HELPER set, as a first client that creates a system and a process, prints the
// pid and waits to be killed.
func TestHelperClient(t *testing.T) {
	if os.Getenv("HCSEMU_TEST_HELPER") != "create" {
		t.Skip("helper process for TestDaemonOutOfProcess")
	}
	api, err := client.NewHCS() // $HCSEMU_ADDRESS
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	vol := os.Getenv("HCSEMU_TEST_VOLUME")
	mustRun(t, api, "create", func(op computecore.Operation) error {
		_, err := api.CreateComputeSystem("oop", containerConfig(vol, ""), op, 0)
		return err
	})
	cs, err := api.OpenComputeSystem("oop", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, api, "start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	fmt.Printf("pid %d\n", s.pid)
	time.Sleep(time.Hour)
}

// TestDaemonOutOfProcess runs cmd/hcsemu as its own process, as it is run by hand: a system
// made by a client process that is then killed is opened, inspected and terminated by another;
// and when the daemon is killed outright, its processes die with it and clients see it go.
func TestDaemonOutOfProcess(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	bin := hcsemuBinary.build(t)
	addr := filepath.Join(dir, "run", "hcsemu.sock")
	daemon := exec.Command(bin, "--address", addr, "--root", filepath.Join(dir, "root"), "--os-version", "10.0.17763.1", "--log-level", "debug")
	daemonLog, _ := os.Create(filepath.Join(dir, "hcsemu.log"))
	daemon.Stdout, daemon.Stderr = daemonLog, daemonLog
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		daemon.Process.Kill()
		daemon.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(daemonLog.Name())
			t.Logf("daemon log:\n%s", b)
		}
	}()
	var b *client.HCS
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := client.DialHCS(addr)
		if err == nil {
			b = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer b.Close()
	if sp, err := b.GetServiceProperties(""); err != nil || !strings.Contains(sp, "10.0.17763.1") {
		t.Errorf("service properties %s, %v: want --os-version", sp, err)
	}

	// The first client, in its own process.
	helper := exec.Command(os.Args[0], "-test.run", "^TestHelperClient$", "-test.v")
	helper.Env = append(os.Environ(), "HCSEMU_TEST_HELPER=create", "HCSEMU_ADDRESS="+addr, "HCSEMU_TEST_VOLUME="+newVolume(t))
	out, _ := helper.StdoutPipe()
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var pid uint32
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			n, _ := strconv.Atoi(v)
			pid = uint32(n)
			break
		}
		t.Logf("helper: %s", sc.Text())
	}
	if pid == 0 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatal("the helper client did not start a process")
	}
	helper.Process.Kill() // the first client dies; its system must not
	helper.Wait()

	cs, err := b.OpenComputeSystem("oop", computecore.GenericAll)
	if err != nil {
		t.Fatalf("open the system of a dead client: %v", err)
	}
	doc := mustRun(t, b, "enumerate", func(op computecore.Operation) error { return b.EnumerateComputeSystems("", op) })
	if !strings.Contains(doc, `"Id":"oop"`) || !strings.Contains(doc, `"State":"Running"`) {
		t.Errorf("enumerate %s", doc)
	}
	p, err := b.OpenProcess(cs, pid, computecore.GenericAll)
	if err != nil {
		t.Fatalf("open process %d: %v", pid, err)
	}
	mustRun(t, b, "terminate process", func(op computecore.Operation) error { return b.TerminateProcess(p, op, "") })
	exit, err := b.WaitForProcessExit(p, opTimeout)
	var ex schema2.ProcessExitedEventData
	if err != nil || json.Unmarshal([]byte(exit), &ex) != nil || ex.ExitCode != exitCodeTerminated {
		t.Errorf("process exit %s, %v", exit, err)
	}
	if _, err := run(t, b, func(op computecore.Operation) error { return b.TerminateComputeSystem(cs, op, "") }); err != nil &&
		!errors.Is(err, computecore.HCS_E_SYSTEM_ALREADY_STOPPED) {
		t.Errorf("terminate: %v", err)
	}
	b.CloseProcess(p)
	b.CloseComputeSystem(cs)

	// Kill the daemon outright: no cleanup of its own runs, yet its processes die (Pdeathsig)
	// and the client sees its system exit and the service go.
	vol := newVolume(t)
	mustRun(t, b, "create", func(op computecore.Operation) error {
		_, err := b.CreateComputeSystem("doomed", containerConfig(vol, ""), op, 0)
		return err
	})
	cs2, err := b.OpenComputeSystem("doomed", computecore.GenericAll)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan computecore.Event, 4)
	b.SetComputeSystemCallback(cs2, 0, 0, func(ev computecore.Event, _ uintptr) { events <- ev })
	mustRun(t, b, "start", func(op computecore.Operation) error { return b.StartComputeSystem(cs2, op, "") })
	s := mustStart(t, b, cs2, schema2.ProcessParameters{CommandLine: prog + " sleep 600"})
	daemon.Process.Signal(syscall.SIGKILL)
	daemon.Wait()
	select {
	case ev := <-events:
		if ev.Type != computecore.EventSystemExited {
			t.Errorf("event %v, want SystemExited", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no SystemExited after the daemon was killed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(int(s.pid), 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if syscall.Kill(int(s.pid), 0) == nil {
		t.Errorf("process %d outlived the killed daemon", s.pid)
	}
	// Nor does the container's C:\proc (silo_linux.go): its silo init unmounts and removes it
	// when the daemon dies.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Lstat(filepath.Join(vol, "proc"))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("C:\\proc of a container of the killed daemon is still there: %v", err)
		}
	}
	if _, err := b.OpenComputeSystem("doomed", computecore.GenericAll); !errors.Is(err, computecore.HCS_E_SERVICE_DISCONNECT) {
		t.Errorf("open after the daemon died: %v", err)
	}

	// A new daemon on the same root and address replaces the stale socket and ends what the
	// killed one left in its cgroups. It also serves loopback TCP on a port of its choosing,
	// and says which in the address file once it is ready, with its key in the key file.
	addrFile, keyFile := filepath.Join(dir, "tcp-address"), filepath.Join(dir, "tcp-key")
	daemon2 := exec.Command(bin, "--address", addr, "--root", filepath.Join(dir, "root"), "--tcp-address", "127.0.0.1:0", "--tcp-address-file", addrFile, "--tcp-key-file", keyFile)
	daemon2.Stdout, daemon2.Stderr = daemonLog, daemonLog
	if err := daemon2.Start(); err != nil {
		t.Fatal(err)
	}
	var c2 *client.HCS
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c2, err = client.DialHCS(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second daemon does not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	doc = mustRun(t, c2, "enumerate", func(op computecore.Operation) error { return c2.EnumerateComputeSystems("", op) })
	if doc != "[]" {
		t.Errorf("a new daemon knows systems: %s", doc)
	}
	c2.Close()
	var tcpAddr []byte
	for deadline := time.Now().Add(10 * time.Second); len(tcpAddr) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon wrote no --tcp-address-file within 10s")
		}
		tcpAddr, _ = os.ReadFile(addrFile)
	}
	if host, port, err := net.SplitHostPort(string(tcpAddr)); err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("--tcp-address-file holds %q: want 127.0.0.1 and the port chosen", tcpAddr)
	}
	key, err := wire.ReadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 64 || key == testKey {
		t.Errorf("--tcp-key-file holds %q: want 32 random bytes in hex", key)
	}
	tc := dialTCPWithKey(t, string(tcpAddr), key)
	if f := tc.call(wire.MethodEnumerateComputeSystems, wire.QueryArgs{}); f.HResult != 0 || f.Result != "[]" {
		t.Errorf("enumerate over TCP: hresult %#x, %s", f.HResult, f.Result)
	}
	tc.c.Close()
	// SIGTERM: the daemon terminates everything and exits 0.
	daemon2.Process.Signal(syscall.SIGTERM)
	if err := daemon2.Wait(); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(addr); err == nil {
		t.Error("the socket is still there after the daemon exited")
	}
	if _, err := os.Stat(addrFile); err == nil {
		t.Error("the TCP address file is still there after the daemon exited")
	}
	if _, err := os.Stat(keyFile); err == nil {
		t.Error("the TCP key file is still there after the daemon exited")
	}
}

// TestDaemonFlags: bad listening flags stop the daemon before it touches anything, with exit
// status 2 and a message naming the flag and value.
func TestDaemonFlags(t *testing.T) {
	bin := hcsemuBinary.build(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"non-loopback", []string{"--tcp-address", "0.0.0.0:9345"}, `--tcp-address "0.0.0.0:9345": "0.0.0.0" is not a loopback IP address`},
		{"host name", []string{"--tcp-address", "localhost:0"}, `--tcp-address "localhost:0"`},
		{"no port", []string{"--tcp-address", "127.0.0.1"}, `--tcp-address "127.0.0.1"`},
		{"address file alone", []string{"--tcp-address-file", filepath.Join(dir, "a")}, "--tcp-address-file " + strconv.Quote(filepath.Join(dir, "a")) + " without --tcp-address"},
		{"no key file", []string{"--tcp-address", "127.0.0.1:0"}, `--tcp-address "127.0.0.1:0" without --tcp-key-file`},
		{"key file alone", []string{"--tcp-key-file", filepath.Join(dir, "k")}, "--tcp-key-file " + strconv.Quote(filepath.Join(dir, "k")) + " without --tcp-address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--address", filepath.Join(dir, "hcsemu.sock"), "--root", filepath.Join(dir, "root")}, tc.args...)
			cmd := exec.Command(bin, args...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
				t.Errorf("hcsemu %q: %v, output %q; want exit status 2 and %q", args, err, out, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "root")); err == nil {
				t.Error("the daemon made its root before refusing its flags")
			}
		})
	}
}

// TestDaemonPermissions: whatever the umask the daemon starts with, what it makes is its
// user's only: the socket (0600) and its folder, the root, and the TCP key file (0600); a root
// that existed with looser permissions is made owner-only too.
func TestDaemonPermissions(t *testing.T) {
	requireRoot(t)
	bin := hcsemuBinary.build(t)
	for _, umask := range []int{0o000, 0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			dir := t.TempDir()
			sock, root := filepath.Join(dir, "run", "hcsemu.sock"), filepath.Join(dir, "root")
			addrFile, keyFile := filepath.Join(dir, "tcp-address"), filepath.Join(dir, "tcp-key")
			if umask == 0 {
				// A root made by someone else, readable by all.
				if err := os.Mkdir(root, 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chmod(root, 0o755)
			}
			// The shell sets the umask the daemon inherits; this process's stays as it is.
			daemon := exec.Command("sh", "-c", fmt.Sprintf(`umask %03o && exec "$0" "$@"`, umask), bin,
				"--address", sock, "--root", root, "--tcp-address", "127.0.0.1:0", "--tcp-address-file", addrFile, "--tcp-key-file", keyFile)
			var out strings.Builder
			daemon.Stdout, daemon.Stderr = &out, &out
			if err := daemon.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				daemon.Process.Signal(syscall.SIGTERM)
				if err := daemon.Wait(); err != nil {
					t.Errorf("daemon: %v\n%s", err, out.String())
				}
			})
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(addrFile); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the daemon is not ready within 10s:\n%s", out.String())
				}
			}
			for _, tc := range []struct {
				what, path string
				want       os.FileMode // exactly, or with want 0 no group or other bits
			}{
				{"the socket", sock, 0o600},
				{"the socket's folder", filepath.Dir(sock), 0},
				{"the root", root, 0},
				{"the TCP key file", keyFile, 0o600},
			} {
				fi, err := os.Stat(tc.path)
				if err != nil {
					t.Errorf("%s: %v", tc.what, err)
					continue
				}
				perm := fi.Mode().Perm()
				if (tc.want != 0 && perm != tc.want) || perm&0o077 != 0 {
					t.Errorf("%s %s has mode %04o under umask %03o: want it its owner's only", tc.what, tc.path, perm, umask)
				}
			}
		})
	}
}
