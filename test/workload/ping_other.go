//go:build !linux

package main

import (
	"errors"
	"net"
	"time"
)

// pinger is Linux-only: the stand-ins run under hcsemu.
type pinger struct{}

func newPinger(net.IP) (*pinger, error) {
	return nil, errors.New("the ping stand-in sends ICMP only on Linux")
}

func (*pinger) echo(int, time.Duration) (time.Duration, int, error) {
	return 0, 0, errors.New("not supported")
}
