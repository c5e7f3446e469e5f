package oci

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/winargs"
)

// Stdio says which streams containerd asked for, so HCS creates only those pipes.
type Stdio struct {
	Stdin, Stdout, Stderr bool
}

// ProcessParameters translates the spec's process (of the init process or of an exec) into
// HCS process parameters.
func ProcessParameters(p *specs.Process, io Stdio) (*schema2.ProcessParameters, error) {
	if p == nil {
		return nil, fmt.Errorf("process: missing: %w", errdefs.ErrInvalidArgument)
	}
	cmdline := p.CommandLine
	if cmdline == "" {
		if len(p.Args) == 0 {
			return nil, fmt.Errorf("process.args: empty and process.commandLine not set: nothing to run: %w", errdefs.ErrInvalidArgument)
		}
		cmdline = CommandLine(p.Args)
	} else if len(p.Args) > 0 {
		return nil, fmt.Errorf("process.commandLine and process.args are both set; set one: %w", errdefs.ErrInvalidArgument)
	}
	if err := checkWindowsStrings(p); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(p.Env))
	for i, kv := range p.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("process.env[%d]=%q: want NAME=VALUE: %w", i, kv, errdefs.ErrInvalidArgument)
		}
		// "The maximum size of a user-defined environment variable is 32,767 characters"
		// (Microsoft, Environment Variables, learn.microsoft.com/windows/win32/procthread/
		// environment-variables); the block as a whole has no limit since Windows Vista
		// (same page; Raymond Chen, "What is the maximum size of a process environment
		// block?", The Old New Thing, 2023-04-04). Counted in UTF-16 units over NAME=VALUE
		// (assumption: the page does not say whether the name counts; counting it is the
		// stricter reading).
		if n := utf16Len(kv); n > MaxEnvVariable {
			return nil, fmt.Errorf("process.env[%d] (%s): %d UTF-16 characters; Windows allows at most %d per variable: %w", i, truncate(k, 64), n, MaxEnvVariable, errdefs.ErrInvalidArgument)
		}
		env[k] = v
	}
	pp := &schema2.ProcessParameters{
		CommandLine: cmdline,
		// The account the process runs as (ContainerUser, ContainerAdministrator, …; empty: the
		// container's default), for the init process and execs alike, as hcsshim sends it
		// (internal/cmd/cmd.go: ProcessParameters.User = Spec.User.Username). containerd sets it
		// from CRI's runAsUserName or the image config's User (pkg/oci WithUser/WithImageConfig).
		User:             p.User.Username,
		WorkingDirectory: p.Cwd,
		Environment:      env,
		EmulateConsole:   p.Terminal,
		CreateStdInPipe:  io.Stdin,
		CreateStdOutPipe: io.Stdout,
		// A console has a single output stream.
		CreateStdErrPipe: io.Stderr && !p.Terminal,
	}
	if pp.WorkingDirectory == "" {
		pp.WorkingDirectory = `C:\`
	}
	if p.Terminal && p.ConsoleSize != nil {
		if p.ConsoleSize.Height > 0xFFFF || p.ConsoleSize.Width > 0xFFFF {
			return nil, fmt.Errorf("process.consoleSize=%dx%d: too large: %w", p.ConsoleSize.Width, p.ConsoleSize.Height, errdefs.ErrInvalidArgument)
		}
		// HCS's ConsoleSize is [height, width] (hcsshim's ProcessParameters comment).
		pp.ConsoleSize = [2]uint16{uint16(p.ConsoleSize.Height), uint16(p.ConsoleSize.Width)}
	}
	return pp, nil
}

// CommandLine joins args into a Windows command line that CommandLineToArgvW (and the C
// runtime) split back into the same args (winargs.Join).
func CommandLine(args []string) string { return winargs.Join(args) }

// MaxEnvVariable is the largest environment variable Windows allows, in UTF-16 characters.
const MaxEnvVariable = 32767

// checkWindowsStrings refuses process strings Windows cannot carry: text that is not UTF-8 (it
// has no UTF-16 form; a spec read from JSON was checked earlier by CheckUTF16, this covers
// specs made in Go) and NUL characters, which end a Windows string early (the rest of an
// argument, a variable or the whole environment block would be cut off).
func checkWindowsStrings(p *specs.Process) error {
	check := func(field, s string) error {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%s: not UTF-8: it cannot be encoded as UTF-16 for Windows: %w", field, errdefs.ErrInvalidArgument)
		}
		if i := strings.IndexByte(s, 0); i >= 0 {
			return fmt.Errorf("%s: a NUL character at offset %d: Windows strings end at NUL: %w", field, i, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	for i, a := range p.Args {
		if err := check(fmt.Sprintf("process.args[%d]", i), a); err != nil {
			return err
		}
	}
	for i, e := range p.Env {
		if err := check(fmt.Sprintf("process.env[%d]", i), e); err != nil {
			return err
		}
	}
	for field, s := range map[string]string{"process.commandLine": p.CommandLine, "process.cwd": p.Cwd, "process.user.username": p.User.Username} {
		if err := check(field, s); err != nil {
			return err
		}
	}
	return nil
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
