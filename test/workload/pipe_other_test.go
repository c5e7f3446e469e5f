//go:build !windows

package main

import (
	"bufio"
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestPipeLinux: the Linux build reaches \\.\pipe\NAME as the unix socket pipeRoot/name (the
// name lower-cased), sends its line and prints the answer.
func TestPipeLinux(t *testing.T) {
	pipeRoot = t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(pipeRoot, "some-pipe"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("answer to " + line))
		got <- line
	}()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pipe", `\\.\pipe\Some-Pipe`, "hello"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr.String())
	}
	if line := <-got; line != "hello\n" {
		t.Errorf("the pipe's server read %q", line)
	}
	if stdout.String() != "answer to hello\n" {
		t.Errorf("stdout %q, want the answer", stdout.String())
	}
	if code := run([]string{"pipe", `\\.\pipe\absent`, "x"}, strings.NewReader(""), &stdout, &stderr); code != 1 {
		t.Errorf("a pipe that is not there: exit code %d, want 1", code)
	}
}
