//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

func isTerminal() bool {
	var t syscall.Termios
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return e == 0
}

func termSize() (rows, cols uint16) {
	var ws [4]uint16
	syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	return ws[0], ws[1]
}
