package main

import "strings"

// hostPath turns a path as a Windows program is given it ("C:\data\x.txt") into one this build
// can open. On Windows that is the path itself. Elsewhere (the Linux build hcsemu runs chrooted
// with C:\ as its root) a drive letter becomes the root and backslashes become slashes, so tests
// can pass the same Windows paths to either build.
func hostPath(p string) string {
	if windowsPaths {
		return p
	}
	if len(p) >= 2 && p[1] == ':' && isLetter(p[0]) {
		p = p[2:]
		if p == "" {
			p = `\`
		}
	}
	return strings.ReplaceAll(p, `\`, "/")
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
