package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	// Started as one of the Windows tools it stands in for (win.go)?
	if tool, ok := standIn(os.Args[0]); ok {
		os.Exit(tool(os.Args[1:], newTool("")))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a bad command line; run exits 2 for it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode is a requested exit code that is not an error.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// run executes one subcommand and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "workload: no subcommand; see the package documentation for the list")
		return 2
	}
	err := dispatch(args[0], args[1:], stdin, stdout, stderr)
	var code exitCode
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "workload %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "workload %s: %v\n", args[0], err)
		return 1
	}
}

func dispatch(cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch cmd {
	case "echo":
		_, err := fmt.Fprintln(stdout, strings.Join(args, " "))
		return err
	case "stderr":
		_, err := fmt.Fprintln(stderr, strings.Join(args, " "))
		return err
	case "args":
		for _, a := range args {
			if _, err := fmt.Fprintf(stdout, "%q\n", a); err != nil {
				return err
			}
		}
		return nil
	case "exit":
		n, err := intArg(args, 0, "exit code")
		if err != nil {
			return err
		}
		return exitCode(n)
	case "sleep":
		d, err := secondsArg(args, 0)
		if err != nil {
			return err
		}
		time.Sleep(d)
		return nil
	case "cat":
		_, err := io.Copy(stdout, stdin)
		return err
	case "env":
		return printEnv(stdout, args)
	case "pwd":
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, wd)
		return err
	case "write":
		if len(args) != 2 {
			return usageError{"want PATH TEXT"}
		}
		path := hostPath(args[0])
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		return os.WriteFile(path, []byte(args[1]), 0o644)
	case "read":
		if len(args) != 1 {
			return usageError{"want PATH"}
		}
		b, err := os.ReadFile(hostPath(args[0]))
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case "tty":
		return tty(stdin, stdout, args)
	case "wait-signal":
		n, err := intArg(args, 0, "exit code")
		if err != nil {
			return err
		}
		return waitSignal(stdout, n)
	case "ignore-signals":
		if len(args) != 0 {
			return usageError{fmt.Sprintf("takes no arguments, got %q", args)}
		}
		return ignoreSignals(stdout)
	case "alloc":
		return alloc(stdout, args)
	case "http":
		if len(args) != 2 {
			return usageError{fmt.Sprintf("want ADDRESS (host:port) TEXT, got %q", args)}
		}
		return serveHTTP(args[0], args[1], stdout)
	case "udp":
		if len(args) != 2 {
			return usageError{fmt.Sprintf("want ADDRESS (host:port) TEXT, got %q", args)}
		}
		return serveUDP(args[0], args[1], stdout)
	case "listen":
		if len(args) != 1 {
			return usageError{fmt.Sprintf("want ADDRESS (host:port), got %q", args)}
		}
		return listen(args[0], stdout)
	case "connect":
		if len(args) != 2 {
			return usageError{fmt.Sprintf("want ADDRESS (host:port) MESSAGE, got %q", args)}
		}
		return connect(args[0], args[1], stdout)
	case "get":
		count := 1
		if len(args) == 2 {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 1 {
				return usageError{fmt.Sprintf("COUNT %q: want a positive number", args[1])}
			}
			count = n
		}
		if len(args) < 1 || len(args) > 2 {
			return usageError{fmt.Sprintf("want URL [COUNT], got %q", args)}
		}
		return get(args[0], count, stdout)
	case "resolve":
		if len(args) != 1 {
			return usageError{fmt.Sprintf("want NAME, got %q", args)}
		}
		return resolve(args[0], stdout)
	case "pipe":
		if len(args) != 2 {
			return usageError{fmt.Sprintf(`want PIPE (\\.\pipe\NAME) MESSAGE, got %q`, args)}
		}
		return pipeCall(args[0], args[1], stdout)
	case "ps":
		if len(args) != 0 {
			return usageError{fmt.Sprintf("takes no arguments, got %q", args)}
		}
		return ps(stdout)
	case "whoami":
		if len(args) != 0 {
			return usageError{fmt.Sprintf("takes no arguments, got %q", args)}
		}
		return whoami(stdout)
	case "tick":
		return tick(stdout, args)
	case "spin":
		d, err := secondsArg(args, 0)
		if err != nil {
			return err
		}
		spin(d)
		return nil
	}
	return usageError{fmt.Sprintf("unknown subcommand %q", cmd)}
}

func intArg(args []string, i int, what string) (int, error) {
	if len(args) <= i {
		return 0, usageError{fmt.Sprintf("missing %s", what)}
	}
	n, err := strconv.Atoi(args[i])
	if err != nil {
		return 0, usageError{fmt.Sprintf("%s %q is not an integer", what, args[i])}
	}
	return n, nil
}

// secondsArg parses a duration in seconds, fractions allowed ("0.5").
func secondsArg(args []string, i int) (time.Duration, error) {
	if len(args) <= i {
		return 0, usageError{"missing SECONDS"}
	}
	f, err := strconv.ParseFloat(args[i], 64)
	if err != nil || f < 0 {
		return 0, usageError{fmt.Sprintf("seconds %q is not a non-negative number", args[i])}
	}
	return time.Duration(f * float64(time.Second)), nil
}

// whoami prints who the process runs as: "user=DOMAIN\NAME" as Windows' whoami shows it (from
// USERDOMAIN and USERNAME, which Windows sets from the process's token) and, where the process
// has a numeric identity (the Linux build under hcsemu), "uid=N gid=M", so a test can tell that
// the account really changed who the process is.
func whoami(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "user=%s\\%s\n", os.Getenv("USERDOMAIN"), os.Getenv("USERNAME")); err != nil {
		return err
	}
	// The account a gMSA container authenticates as on the network, where hcsemu shows it
	// (internal/hcsemu/compute NetworkIdentityVariable).
	if n := os.Getenv("HCSEMU_NETWORK_IDENTITY"); n != "" {
		if _, err := fmt.Fprintf(w, "network=%s\n", n); err != nil {
			return err
		}
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	_, err := fmt.Fprintf(w, "uid=%d gid=%d\n", os.Getuid(), os.Getgid())
	return err
}

func printEnv(w io.Writer, names []string) error {
	bw := bufio.NewWriter(w)
	if len(names) == 0 {
		env := os.Environ()
		sort.Strings(env)
		for _, kv := range env {
			fmt.Fprintln(bw, kv)
		}
		return bw.Flush()
	}
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			fmt.Fprintf(bw, "%s=%s\n", name, v)
		} else {
			fmt.Fprintf(bw, "%s is not set\n", name)
		}
	}
	return bw.Flush()
}

// waitSignal waits for an interrupt or a termination request. On Windows the Go runtime turns
// CTRL_C_EVENT and CTRL_BREAK_EVENT into os.Interrupt and CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT
// and CTRL_SHUTDOWN_EVENT into SIGTERM (os/signal documentation), so one code path serves both.
func waitSignal(w io.Writer, code int) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	// "waiting" tells a test the handler is in place, so a signal sent after it is not lost.
	fmt.Fprintln(w, "waiting")
	sig := <-ch
	name := "SIGTERM"
	if sig == os.Interrupt {
		name = "SIGINT"
	}
	fmt.Fprintln(w, "got", name)
	return exitCode(code)
}

// ignoreSignals prints "ignoring" and then outlives every interrupt and termination request until
// it is killed, for tests of how a stop treats a process that will not stop. It catches the
// signals and drops them rather than calling signal.Ignore, because on Windows the Go runtime's
// console control handler reports an event as handled only when the program asked to be notified
// of it; an ignored one falls through to the default handler, which ends the process. (Windows
// still ends a process some seconds after a close, logoff or shutdown event, whatever it does.)
func ignoreSignals(w io.Writer) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	// As for wait-signal: the line says the handler is in place.
	if _, err := fmt.Fprintln(w, "ignoring"); err != nil {
		return err
	}
	for range ch {
	}
	return nil // not reached: nothing closes ch
}

// tty prints "tty" if stdout is a terminal (a console on Windows), else "notty". With "size" it
// then waits for a line on stdin, so that a test can resize the console after the first line and
// before the answer, and prints the console's size as "size ROWS COLS".
func tty(stdin io.Reader, stdout io.Writer, args []string) error {
	withSize, watch := false, false
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == "size":
		withSize = true
	case len(args) == 1 && args[0] == "watch":
		watch = true
	default:
		return usageError{fmt.Sprintf(`want no argument, "size" or "watch", got %q`, args)}
	}
	// Only a file can be a terminal; run's callers pass os.Stdout, tests a buffer.
	f, _ := stdout.(*os.File)
	word := "notty"
	if f != nil && isTerminal(f) {
		word = "tty"
	}
	if _, err := fmt.Fprintln(stdout, word); err != nil || !(withSize || watch) {
		return err
	}
	if watch {
		if f == nil {
			return errors.New("stdout is not a file, so it has no console size")
		}
		return watchSize(stdin, stdout, f)
	}
	// End of input also lets it go on: a test that closes stdin instead of writing a line.
	if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read stdin: %w", err)
	}
	if f == nil {
		return errors.New("stdout is not a file, so it has no console size")
	}
	rows, cols, err := consoleSize(f)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "size %d %d\n", rows, cols)
	return err
}

// sizePoll is how often "tty watch" reads the console size. A poll, not SIGWINCH: a Windows
// console has no signal for it, and the Linux and Windows builds share this code.
const sizePoll = 50 * time.Millisecond

// watchSize prints "size ROWS COLS" now and each time the console's size changes, until stdin
// ends (a line "exit" or EOF), so that a test can resize it through any path and wait for the
// line instead of racing the resize against its input.
func watchSize(stdin io.Reader, stdout io.Writer, f *os.File) error {
	done := make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdin)
		for {
			line, err := r.ReadString('\n')
			if strings.TrimSpace(line) == "exit" || errors.Is(err, io.EOF) {
				done <- nil
				return
			}
			if err != nil {
				done <- fmt.Errorf("read stdin: %w", err)
				return
			}
		}
	}()
	lastRows, lastCols := -1, -1
	for {
		rows, cols, err := consoleSize(f)
		if err != nil {
			return err
		}
		if rows != lastRows || cols != lastCols {
			if _, err := fmt.Fprintf(stdout, "size %d %d\n", rows, cols); err != nil {
				return err
			}
			lastRows, lastCols = rows, cols
		}
		select {
		case err := <-done:
			return err
		case <-time.After(sizePoll):
		}
	}
}

// sink keeps alloc's memory reachable so the compiler and GC cannot drop it.
var sink [][]byte

func alloc(w io.Writer, args []string) error {
	mb, err := intArg(args, 0, "MB")
	if err != nil {
		return err
	}
	if mb < 0 {
		return usageError{fmt.Sprintf("MB %d is negative", mb)}
	}
	hold := time.Duration(0)
	if len(args) > 1 {
		if hold, err = secondsArg(args, 1); err != nil {
			return err
		}
	}
	const mib = 1 << 20
	for i := 0; i < mb; i++ {
		b := make([]byte, mib)
		// Touch every page so the memory is committed and shows in the working set.
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		sink = append(sink, b)
	}
	fmt.Fprintf(w, "allocated %d MiB\n", mb)
	time.Sleep(hold)
	return nil
}

// tick prints "tick N" every interval, count times (0: until killed), so that a test sees a
// running container's output go on (a CRI log reopened under it).
func tick(w io.Writer, args []string) error {
	interval, err := secondsArg(args, 0)
	if err != nil {
		return err
	}
	count := 0
	if len(args) > 1 {
		if count, err = intArg(args, 1, "COUNT"); err != nil {
			return err
		}
		if count < 0 {
			return usageError{fmt.Sprintf("COUNT %d is negative", count)}
		}
	}
	for i := 1; count == 0 || i <= count; i++ {
		if _, err := fmt.Fprintf(w, "tick %d\n", i); err != nil {
			return err
		}
		if count == 0 || i < count {
			time.Sleep(interval)
		}
	}
	return nil
}

// spin keeps one CPU busy for d.
func spin(d time.Duration) {
	deadline := time.Now().Add(d)
	var n uint64
	for time.Now().Before(deadline) {
		for i := 0; i < 100000; i++ {
			n = n*6364136223846793005 + 1442695040888963407
		}
	}
	// KeepAlive stops the compiler from dropping the loop as dead code.
	runtime.KeepAlive(n)
}
