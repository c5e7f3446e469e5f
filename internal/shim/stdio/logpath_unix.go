//go:build !windows

package stdio

import "path/filepath"

// localPath: on Linux the path of a file:// URI is the file's path as it is (a "/C:/x" is a
// folder named "C:" here, not a drive).
func localPath(uriPath string) string { return filepath.Clean(uriPath) }
