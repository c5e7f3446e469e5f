package compute

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
)

// volume is a container's C:\ on this machine: a folder opened as an os.Root, so that no path
// a container names (nor a symbolic link inside it) resolves outside it.
type volume struct {
	root *os.Root
}

// openVolume opens the folder at dir as a container's C:\.
func openVolume(dir string) (*volume, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &volume{root: r}, nil
}

func (v *volume) Close() error { return v.root.Close() }

// winToRel turns a Windows path rooted at C:\ (or at \) into slash-separated components
// relative to the volume. ok is false for another drive, a UNC or device path, or a relative
// path.
func winToRel(p string) (rel string, ok bool) {
	p = strings.ReplaceAll(p, "/", `\`)
	switch {
	case strings.HasPrefix(p, `\\`):
		return "", false // UNC or \\?\ device path
	case len(p) >= 2 && p[1] == ':':
		if p[0] != 'C' && p[0] != 'c' {
			return "", false
		}
		p = p[2:]
		if !strings.HasPrefix(p, `\`) {
			return "", false // drive-relative, as "C:foo"
		}
	case strings.HasPrefix(p, `\`):
	default:
		return "", false
	}
	var parts []string
	for _, c := range strings.Split(p, `\`) {
		switch c {
		case "", ".":
		case "..":
			if len(parts) > 0 {
				parts = parts[:len(parts)-1]
			}
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), true
}

// joinWin joins a relative Windows path onto an absolute one.
func joinWin(dir, rel string) string {
	return strings.TrimRight(dir, `\/`) + `\` + rel
}

// lookup finds rel in the volume component by component, matching names without regard to
// case as NTFS does, and returns the path as it is spelled on disk ("" for the root).
func (v *volume) lookup(rel string) (string, fs.FileInfo, error) {
	cur := "."
	if rel == "" {
		fi, err := v.root.Stat(".")
		return "", fi, err
	}
	for _, name := range strings.Split(rel, "/") {
		next := path.Join(cur, name)
		if _, err := v.root.Lstat(next); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				return "", nil, err
			}
			found := false
			if d, err := v.root.Open(cur); err == nil {
				entries, _ := d.ReadDir(-1)
				d.Close()
				for _, e := range entries {
					if strings.EqualFold(e.Name(), name) {
						next = path.Join(cur, e.Name())
						found = true
						break
					}
				}
			}
			if !found {
				return "", nil, fs.ErrNotExist
			}
		}
		cur = next
	}
	fi, err := v.root.Stat(cur)
	if err != nil {
		return "", nil, err
	}
	return cur, fi, nil
}

// Resolved is an executable found in a volume: its Windows path and its path inside the chroot.
type Resolved struct {
	WindowsPath string
	LinuxPath   string
}

// envLookup finds an environment variable the way Windows does: names without regard to case.
func envLookup(env map[string]string, name string) (string, bool) {
	if v, ok := env[name]; ok {
		return v, true
	}
	for k, v := range env {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// resolveExecutable finds the program a process runs, as CreateProcess does with the first
// token of a command line
// (https://learn.microsoft.com/windows/win32/api/processthreadsapi/nf-processthreadsapi-createprocessw,
// lpCommandLine): a name with a directory part is taken as given (relative to the working
// directory if it is relative); a bare name is looked for in the working directory, then in
// C:\Windows\System32, C:\Windows\System and C:\Windows, then in each entry of the process's
// PATH (the documented order, where the loading program's folder and the parent's current
// folder, unknowable here, are taken to be the working directory: assumption). "If the file
// name does not contain an extension, .exe is appended": only .exe, not PATHEXT's list, which
// is cmd.exe's and not CreateProcess's, so "cmd" runs cmd.exe and "script" never runs
// script.cmd. The error is HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND), which is what HCS returns
// for a missing program.
func (v *volume) resolveExecutable(name, workDir string, env map[string]string) (Resolved, error) {
	if name == "" {
		return Resolved{}, hresult.Errorf(computecore.E_INVALIDARG, "CommandLine: no program to run")
	}
	ext := ""
	if base := name[strings.LastIndexAny(name, `\/:`)+1:]; !strings.Contains(base, ".") {
		ext = ".exe"
	}
	var dirs []string
	hasDir := strings.ContainsAny(name, `\/:`)
	if hasDir {
		if _, abs := winToRel(name); abs {
			dirs = []string{""}
		} else {
			dirs = []string{workDir}
		}
	} else {
		dirs = []string{workDir, `C:\Windows\System32`, `C:\Windows\System`, `C:\Windows`}
		if p, ok := envLookup(env, "PATH"); ok {
			for _, d := range strings.Split(p, ";") {
				if d = strings.Trim(strings.TrimSpace(d), `"`); d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	for _, dir := range dirs {
		full := name
		if dir != "" {
			full = joinWin(dir, name)
		}
		rel, ok := winToRel(full + ext)
		if !ok {
			continue
		}
		onDisk, fi, err := v.lookup(rel)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		return Resolved{WindowsPath: `C:\` + strings.ReplaceAll(onDisk, "/", `\`), LinuxPath: "/" + onDisk}, nil
	}
	return Resolved{}, hresult.Errorf(computecore.E_FILE_NOT_FOUND, "the system cannot find the file specified: %q", name)
}

// resolveDir maps a Windows directory (the working directory, a mapped directory's target)
// to its path in the chroot, spelled as on disk.
func (v *volume) resolveDir(winPath string) (string, error) {
	rel, ok := winToRel(winPath)
	if !ok {
		return "", hresult.Errorf(computecore.E_INVALIDARG, "%q is not a path on the container's C: drive", winPath)
	}
	onDisk, fi, err := v.lookup(rel)
	if err != nil {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "the system cannot find the path specified: %q", winPath)
	}
	if !fi.IsDir() {
		return "", hresult.Errorf(computecore.E_PATH_NOT_FOUND, "%q is not a directory", winPath)
	}
	return "/" + onDisk, nil
}
