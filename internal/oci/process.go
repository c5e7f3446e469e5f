package oci

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/openhcs/runhcs/internal/hcs/schema2"
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
	env := make(map[string]string, len(p.Env))
	for i, kv := range p.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("process.env[%d]=%q: want NAME=VALUE: %w", i, kv, errdefs.ErrInvalidArgument)
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
// runtime) split back into the same args: the rules of Go's syscall.EscapeArg on Windows.
func CommandLine(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(escapeArg(a))
	}
	return b.String()
}

func escapeArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, " \t\"") {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			slashes++
		case '"':
			// Backslashes before a quote are doubled, and the quote itself escaped.
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(c)
	}
	// Backslashes before the closing quote are doubled.
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String()
}
