//go:build linux

// Command testprog is the program the hcsemu daemon tests run inside a compute system. Its
// tests build it statically (CGO_ENABLED=0) into the system's volume as C:\bin\testprog.exe.
package main

import (
	"bufio"
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
		fmt.Fprintln(os.Stderr, "usage: testprog echo|stderr|exit|sleep|cat|env|read|pwd|args|tty|wait-signal|ignore-signals|alloc ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "stderr":
		fmt.Fprintln(os.Stderr, strings.Join(args, " "))
	case "exit":
		n, _ := strconv.Atoi(args[0])
		os.Exit(n)
	case "sleep":
		n, _ := strconv.ParseFloat(args[0], 64)
		time.Sleep(time.Duration(n * float64(time.Second)))
	case "cat":
		io.Copy(os.Stdout, os.Stdin)
	case "env":
		for _, n := range args {
			fmt.Printf("%s=%s\n", n, os.Getenv(n))
		}
	case "read":
		b, err := os.ReadFile(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "pwd":
		wd, _ := os.Getwd()
		fmt.Println(wd)
	case "args":
		for _, a := range os.Args[2:] {
			fmt.Printf("[%s]\n", a)
		}
	case "tty":
		// A terminal answers TCGETS; a pipe does not.
		if _, err := os.Stdin.Stat(); err == nil && isTerminal() {
			fmt.Println("tty")
		} else {
			fmt.Println("notty")
		}
		if len(args) > 0 && args[0] == "size" {
			// Wait for a line, so the test can resize first, then print the size.
			bufio.NewReader(os.Stdin).ReadString('\n')
			r, c := termSize()
			fmt.Printf("size %d %d\n", r, c)
		}
	case "wait-signal":
		code, _ := strconv.Atoi(args[0])
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		s := <-ch
		fmt.Println(signalName(s))
		os.Exit(code)
	case "ignore-signals":
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "alloc":
		mb, _ := strconv.Atoi(args[0])
		b := make([]byte, mb<<20)
		for i := range b {
			b[i] = byte(i)
		}
		fmt.Println("allocated")
		time.Sleep(time.Hour)
		_ = b[len(b)-1]
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func signalName(s os.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	return "SIGTERM"
}
