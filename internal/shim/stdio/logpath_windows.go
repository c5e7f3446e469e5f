package stdio

import "path/filepath"

// localPath turns the path of a file:// URI into a Windows path. containerd's clients build
// the URI with pkg/cio.LogURIGenerator, which writes C:\dir\log as file:///C:/dir/log (forward
// slashes and a third slash before the drive: a local file has an empty authority), so
// url.Parse gives the path "/C:/dir/log"; opened as it is, that is a path rooted on the
// current drive, not C:. The leading slash before a drive letter is dropped, as the Windows
// shim for containerd (hcsshim internal/cmd/io_binary.go, sanitizePath) drops it from the
// path of a binary:// URI. containerd's own Windows tests (pkg/cio/io_test.go,
// TestLogFileAbsolutePath with urlPrefix "/C:") confirm the parsed path keeps the slash.
func localPath(uriPath string) string {
	p := uriPath
	if len(p) >= 3 && p[0] == '/' && isDriveLetter(p[1]) && p[2] == ':' {
		p = p[1:]
	}
	return filepath.Clean(filepath.FromSlash(p))
}

func isDriveLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
