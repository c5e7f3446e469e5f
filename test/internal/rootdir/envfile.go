package rootdir

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/openhcs/runhcs/internal/atomicfile"
)

// WriteEnv writes vars, in order, to path as lines a POSIX shell sources (`export NAME='value'`),
// atomically, so a reader never sees half a file.
func WriteEnv(path string, vars [][2]string) error {
	var b strings.Builder
	for _, kv := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return atomicfile.WriteFile(path, []byte(b.String()), 0o644)
}

// ReadEnv reads the export lines WriteEnv wrote. A missing file is an error wrapping
// os.ErrNotExist.
func ReadEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = unquote(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return env, nil
}

// shellQuote quotes s for a POSIX shell's single quotes.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'\''`, "'")
	}
	return s
}
