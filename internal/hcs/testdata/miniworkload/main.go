// Command miniworkload is the contract suite's stand-in for ./test/workload when a tree does not
// have it: the same subcommands the suite uses (echo, stderr, exit, sleep, cat, tty,
// wait-signal, alloc, spin, read), and nothing else.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload COMMAND [ARGS…]")
		os.Exit(2)
	}
	args := os.Args[2:]
	num := func(i int) int {
		if len(args) <= i {
			fmt.Fprintf(os.Stderr, "%s: missing argument %d\n", os.Args[1], i+1)
			os.Exit(2)
		}
		n, err := strconv.Atoi(args[i])
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
			os.Exit(2)
		}
		return n
	}
	switch os.Args[1] {
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "stderr":
		fmt.Fprintln(os.Stderr, strings.Join(args, " "))
	case "exit":
		os.Exit(num(0))
	case "sleep":
		time.Sleep(time.Duration(num(0)) * time.Second)
	case "cat":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "read":
		b, err := os.ReadFile(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "tty":
		if _, err := ioctlWinsize(); err == nil {
			fmt.Println("tty")
		} else {
			fmt.Println("notty")
		}
	case "wait-signal":
		code := num(0)
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("waiting")
		s := <-c
		if s == syscall.SIGINT {
			fmt.Println("got SIGINT")
		} else {
			fmt.Println("got SIGTERM")
		}
		os.Exit(code)
	case "alloc":
		mb := num(0)
		b := make([]byte, mb<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Printf("allocated %d MiB\n", mb)
		if len(args) > 1 {
			time.Sleep(time.Duration(num(1)) * time.Second)
		}
		_ = b[len(b)-1]
	case "spin":
		end := time.Now().Add(time.Duration(num(0)) * time.Second)
		for x := 0; time.Now().Before(end); x++ {
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
