package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run relays between stdin/stdout and a TCP connection to args' HOST PORT and returns the exit
// code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintf(stderr, "wincat (runhcs stand-in): want HOST PORT, got %q\n", args)
		return 2
	}
	c, err := net.Dial("tcp", net.JoinHostPort(args[0], args[1]))
	if err != nil {
		fmt.Fprintf(stderr, "wincat (runhcs stand-in): %v\n", err)
		return 1
	}
	defer c.Close()
	go func() {
		io.Copy(c, stdin)
		// The client is done sending: tell the server, which may still answer.
		c.(*net.TCPConn).CloseWrite()
	}()
	// The server's side ending (or failing) ends the stream: what it sent is all there is.
	if _, err := io.Copy(stdout, c); err != nil {
		fmt.Fprintf(stderr, "wincat (runhcs stand-in): %v\n", err)
		return 1
	}
	return 0
}
