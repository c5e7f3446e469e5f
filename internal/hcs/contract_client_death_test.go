package hcs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// The client-death contract: compute systems belong to the service, not to the client that
// created them. A helper process (this test binary, re-executed) creates and starts a system
// and two processes in it, reports their pids, and is killed; the test, a second client, then
// opens the system, reads both processes' exits and terminates the system.

const (
	helperEnv      = "HCS_CONTRACT_HELPER"
	helperIDEnv    = "HCS_CONTRACT_ID"
	helperImageEnv = "HCS_CONTRACT_IMAGE"
)

// helperMain is the killed client. It prints "pids P1 P2" and then waits to be killed.
func helperMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, image := os.Getenv(helperIDEnv), os.Getenv(helperImageEnv)
	s, err := NewHostClient().CreateComputeSystem(ctx, id, containerDoc(image))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := s.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	waiter, err := s.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: workload("wait-signal", "5")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sleeper, err := s.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: workload("sleep", "2")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pids %d %d\n", waiter.Pid(), sleeper.Pid())
	time.Sleep(time.Minute) // killed long before
	return 1
}

func TestContractClientDeath(t *testing.T) {
	env := requireContract(t)
	ctx := testCtx(t)
	id := testID(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperIDEnv+"="+id, helperImageEnv+"="+env.image, "HCSEMU_ADDRESS="+env.addr)
	var stderr bytesBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, leave no system behind.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if s, err := env.hcs.OpenComputeSystem(ctx, id); err == nil {
			s.Terminate(ctx)
			s.Close()
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	var waiterPid, sleeperPid uint32
	select {
	case l := <-line:
		if _, err := fmt.Sscanf(l, "pids %d %d", &waiterPid, &sleeperPid); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper said %q (%v); its stderr: %s", l, err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper did not report its processes; its stderr: %s", stderr.String())
	}
	// The first client dies without closing anything.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s, err := env.hcs.OpenComputeSystem(ctx, id)
	if err != nil {
		t.Fatalf("second client: OpenComputeSystem %s: %v", id, err)
	}
	defer s.Close()
	props, err := s.Properties(ctx, schema2.PropertyTypeProcessList)
	if err != nil {
		t.Fatal(err)
	}
	if props.State != schema2.StateRunning || !hasPid(props.ProcessList, waiterPid) {
		t.Fatalf("after the creator died: State %q, ProcessList %+v; want Running with pid %d", props.State, props.ProcessList, waiterPid)
	}
	list, err := env.hcs.EnumerateComputeSystems(ctx, &schema2.SystemQuery{Owners: []string{"hcs-contract"}})
	if err != nil || !containsID(list, id) {
		t.Errorf("env.hcs.EnumerateComputeSystems(Owners: hcs-contract) lacks %s: %v", id, err)
	}

	sleeper, err := s.OpenProcess(ctx, sleeperPid)
	if err != nil {
		t.Fatalf("OpenProcess %d: %v", sleeperPid, err)
	}
	defer sleeper.Close()
	if code := waitExit(t, sleeper, 30*time.Second); code != 0 {
		t.Errorf("sleeper exit code %d", code)
	}

	waiter, err := s.OpenProcess(ctx, waiterPid)
	if err != nil {
		t.Fatalf("OpenProcess %d: %v", waiterPid, err)
	}
	defer waiter.Close()
	if in, out, errp := waiter.Stdio(); in != nil || out != nil || errp != nil {
		t.Errorf("an opened process has stdio")
	}
	if ok, err := waiter.Signal(ctx, &schema2.SignalProcessOptions{Signal: schema2.SignalCtrlC}); !ok || err != nil {
		t.Fatalf("Signal CtrlC to %d: %v, %v", waiterPid, ok, err)
	}
	if code := waitExit(t, waiter, 30*time.Second); code != 5 {
		t.Errorf("waiter exit code %d, want 5", code)
	}

	if err := s.Terminate(ctx); err != nil && !errorsIsAny(err, ErrAlreadyStopped) {
		t.Fatalf("Terminate: %v", err)
	}
	select {
	case <-s.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("Exited not closed after Terminate")
	}
	// HCS forgets a stopped system when its last handle (process handles included) closes.
	sleeper.Close()
	waiter.Close()
	s.Close()
	// Closing is synchronous, as HcsCloseComputeSystem is: the system is gone at once.
	if again, err := env.hcs.OpenComputeSystem(ctx, id); !errorsIsAny(err, ErrNotFound) {
		if err == nil {
			again.Close()
		}
		t.Fatalf("OpenComputeSystem after Terminate and Close: %v, want ErrNotFound", err)
	}
}
