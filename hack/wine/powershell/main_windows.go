// Command powershell is the emulated node's stand-in for powershell.exe, installed over Wine's
// stub (C:\windows\system32\WindowsPowerShell\v1.0\powershell.exe) by hack/wine/setup.sh. It
// runs the few PowerShell commands Windows programs of the node are known to run and refuses
// every other one, naming it; nothing in the product depends on it.
//
// Why: kubelet's Windows subPath preparation (k8s.io/kubernetes v1.37.2
// pkg/volume/util/subpath/subpath_windows.go, isLinkPath and evalSymlink) asks PowerShell
// whether each component of a subPath is a link and where it leads:
//
//	powershell /c "$ErrorActionPreference = 'Stop'; (Get-Item -Force -LiteralPath $env:linkpath).LinkType"
//	powershell /c "$ErrorActionPreference = 'Stop'; (Get-Item -Force -LiteralPath $env:linkpath).Target"
//
// Wine 8's powershell.exe is a stub that prints nothing and succeeds, so kubelet took every path
// for a plain one, and then refused a subPath through a configMap's key, which is a link
// (kubelet's own check: "subpath ... is an unexpected symlink after EvalSymlinks"). On Windows
// PowerShell answers "SymbolicLink" (empty for a file or folder that is not a link) and the
// link's target as stored; with $ErrorActionPreference = 'Stop' a missing path fails. This
// answers the same from os.Lstat and os.Readlink (hack/wine's winesymlink.c makes them see
// links as Windows does). Tested in internal/wintest, TestPowershellGetItem.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

const getItem = "$ErrorActionPreference = 'Stop'; (Get-Item -Force -LiteralPath $env:linkpath)."

func main() {
	out, err := run(os.Args[1:], os.Getenv("linkpath"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "powershell (hack/wine stand-in):", err)
		os.Exit(1)
	}
	fmt.Println(out)
}

// run answers one command line: /c (or -Command) and one of the known scripts.
func run(args []string, linkpath string) (string, error) {
	if len(args) != 2 || (!strings.EqualFold(args[0], "/c") && !strings.EqualFold(args[0], "-command")) {
		return "", fmt.Errorf("unsupported command line %q: only /c SCRIPT with a known script", args)
	}
	prop, ok := strings.CutPrefix(args[1], getItem)
	if !ok || (prop != "LinkType" && prop != "Target") {
		return "", fmt.Errorf("unsupported script %q", args[1])
	}
	if linkpath == "" {
		return "", errors.New("Get-Item: $env:linkpath is empty")
	}
	fi, err := os.Lstat(linkpath)
	if err != nil {
		return "", fmt.Errorf("Get-Item: cannot find path %q: %w", linkpath, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", nil // neither LinkType nor Target: not a link
	}
	if prop == "LinkType" {
		return "SymbolicLink", nil
	}
	return os.Readlink(linkpath)
}
