//go:build !linux

package main

import (
	"fmt"
	"os"
)

// The demo starts hcsemu, which emulates HCS on Linux; on Windows, use the real HCS with
// containerd as docs/install-windows.md describes.
func main() {
	fmt.Fprintln(os.Stderr, "demo: runs on Linux only (it starts the hcsemu emulator of HCS)")
	os.Exit(2)
}
