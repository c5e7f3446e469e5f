//go:build !linux

package main

import "errors"

func ioctlWinsize() (struct{}, error) { return struct{}{}, errors.New("not supported") }
