//go:build !windows

package hcs

import "errors"

// hostOSVersionFromOS has nothing to ask off Windows: the emulator's service properties are the
// only source of the emulated host build.
func hostOSVersionFromOS() (string, error) {
	return "", errors.New("not running on Windows, and the HCS emulator did not report its --os-version")
}
