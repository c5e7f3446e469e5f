package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/openhcs/runhcs/test/harness"
)

func main() {
	os.Exit(run())
}

func run() (code int) {
	version := flag.String("containerd", harness.ContainerdVersion(), "containerd to run: 2 or 1.7")
	showLogs := flag.Bool("show-logs", false, "print the tails of the daemon logs before tearing down")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: run as root (hcsemu mounts layers and chroots container processes)")
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-interrupted
		fmt.Fprintf(os.Stderr, "\ndemo: %v: tearing down\n", s)
		cancel()
	}()

	defer harness.RemoveBuilds()
	startCtx, startCancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := harness.New(startCtx, harness.Options{Containerd: *version, Progress: os.Stderr}, nil)
	startCancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	failed := false
	defer func() {
		fmt.Fprintln(os.Stderr, "runhcs: tearing down (containers, daemons, mounts, temporary root)")
		env.Close(failed || *showLogs)
		if left := env.Leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "runhcs: left behind: %s\n", strings.Join(left, "; "))
			if code == 0 {
				code = 1
			}
			return
		}
		fmt.Fprintln(os.Stderr, "runhcs: done; nothing left running or mounted")
	}()

	args := []string{"--address", env.Address, "--namespace", harness.Namespace,
		"run", "--rm", "--runtime", harness.Runtime, "--snapshotter", harness.Snapshotter,
		"--platform", harness.Platform, env.Image, "runhcs-demo"}
	args = append(args, flag.Args()...)
	fmt.Fprintf(os.Stderr, "runhcs: ctr %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, env.Bin.RunCtr, args...)
	cmd.Stdout = os.Stdout
	cmd.Stderr = &dropDeprecations{w: os.Stderr}
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		// Interrupted: the teardown above says what happens; the logs are not interesting.
		return 130
	}
	if err != nil {
		failed = true
		fmt.Fprintf(os.Stderr, "demo: ctr run: %v\n", err)
		if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		return 1
	}
	fmt.Fprintln(os.Stderr, "runhcs: the container exited with code 0")
	return 0
}

// dropDeprecations passes writes through, except the cgroup v1 deprecation warning containerd
// 2.x's ctr prints on every start, which says nothing about the container.
type dropDeprecations struct{ w io.Writer }

func (d *dropDeprecations) Write(p []byte) (int, error) {
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if bytes.HasPrefix(line, []byte(`time="`)) && bytes.Contains(line, []byte(`msg="DEPRECATION:`)) {
			continue
		}
		if _, err := d.w.Write(line); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
