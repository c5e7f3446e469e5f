package main

import "golang.org/x/sys/unix"

func ioctlWinsize() (*unix.Winsize, error) { return unix.IoctlGetWinsize(1, unix.TIOCGWINSZ) }
