package hostprocess

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/winargs"
)

// mergeEnv adds extra to base, later entries replacing earlier ones of the same name (names
// compare case-insensitively, as Windows does).
func mergeEnv(base, extra []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range append(append([]string{}, base...), extra...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[strings.ToUpper(k)]; ok {
			out[i] = kv
			continue
		}
		idx[strings.ToUpper(k)] = len(out)
		out = append(out, kv)
	}
	return out
}

// appendPath appends folders to the PATH variable of env (making one if there is none), with
// sep between folders (";" on Windows, ":" on Linux).
func appendPath(env, folders []string, sep string) []string {
	if len(folders) == 0 {
		return env
	}
	for i, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, "PATH") {
			env[i] = k + "=" + strings.TrimSuffix(v, sep) + sep + strings.Join(folders, sep)
			return env
		}
	}
	return append(env, "PATH="+strings.Join(folders, sep))
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// findApplication resolves the command line's program as hcsshim does for job containers
// (getApplicationName): an absolute path as it is, else the working directory, then each PATH
// folder, trying the name with .COM, .EXE, .BAT, .CMD and then as it is. CreateProcess's own
// search would use the shim's folder and PATH, not the container's.
func findApplication(cmdline, dir, path string, local func(string) string) (string, error) {
	args := winargs.Split(cmdline)
	if len(args) == 0 {
		return "", fmt.Errorf("command line %q: no program: %w", cmdline, errdefs.ErrInvalidArgument)
	}
	name := local(args[0])
	try := func(base string) (string, bool) {
		for _, ext := range []string{".com", ".exe", ".bat", ".cmd", ""} {
			c := base + ext
			if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
				return c, true
			}
		}
		return "", false
	}
	if filepath.IsAbs(name) || strings.ContainsAny(name, `\/`) {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if c, ok := try(p); ok {
			return c, nil
		}
		return "", fmt.Errorf("program %q of command line %q (looked for %s): %w", name, cmdline, p, os.ErrNotExist)
	}
	for _, d := range append([]string{dir}, filepath.SplitList(path)...) {
		if d == "" {
			continue
		}
		if c, ok := try(filepath.Join(d, name)); ok {
			return c, nil
		}
	}
	return "", fmt.Errorf("program %q of command line %q: not in %q nor on PATH: %w", name, cmdline, dir, errors.Join(os.ErrNotExist, errdefs.ErrNotFound))
}
