package wintest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

const dialEnv = "WINTEST_DIAL"

// TestMain lets the test binary be the client process of TestWaitUnixExitClosesSockets and the
// helper of TestCreateProcessRetry.
func TestMain(m *testing.M) {
	if addr := os.Getenv(dialEnv); addr != "" {
		os.Exit(dialAndHang(addr))
	}
	if v := os.Getenv(spinHelperEnv); v == "1" || v == "forever" {
		os.Exit(spinUntilCounted())
	}
	if os.Getenv(spawnHelperEnv) == "1" {
		os.Exit(spawnOnce())
	}
	if os.Getenv(ctrlHelperEnv) == "1" {
		os.Exit(waitCtrl())
	}
	if mode := os.Getenv(memHelperEnv); mode != "" {
		os.Exit(memHelper(mode))
	}
	if name := os.Getenv(accountHelperEnv); name != "" {
		os.Exit(findAccount(name))
	}
	os.Exit(m.Run())
}

// dialAndHang connects to addr, says so and waits to be killed.
func dialAndHang(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Println("connected")
	time.Sleep(time.Minute) // killed long before
	return 1
}

// A client that is killed and waited for has closed its sockets once WaitUnixExit returns, as it
// has on Windows once Wait returns: the server's read sees the end of the connection at once.
func TestWaitUnixExitClosesSockets(t *testing.T) {
	if !UnderWine() {
		t.Skip("WaitUnixExit is for Wine; Windows closes a terminated process's sockets before Wait returns")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 5; i++ {
		// A positional argument after the flags, which the test binary ignores, marks the
		// client's command line.
		marker := fmt.Sprintf("wintest-client-%d-%d", os.Getpid(), i)
		cmd := exec.Command(os.Args[0], "-test.run=^$", marker)
		cmd.Env = append(os.Environ(), dialEnv+"="+l.Addr().String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		conn, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		pid, err := UnixPIDOf(marker)
		if line != "connected\n" || err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("client said %q; its Linux process: %v", line, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if err := WaitUnixExit(pid, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		// The FIN is queued already: the read returns at once. The deadline only keeps a
		// connection that is still open from hanging the test.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := conn.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("round %d: after WaitUnixExit(%d), the server's read = %d, %v; want EOF", i, pid, n, err)
		}
		conn.Close()
	}
}
