package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// listen serves the echo protocol on address until the process is killed, and prints the
// address each connection comes from ("accepted from 10.250.1.10:49152"): whether a peer's
// address reached the pod unchanged, or NATed, is what the networking tests ask.
func listen(address string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "listening %s\n", ln.Addr()); err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "accepted from %s\n", c.RemoteAddr()); err != nil {
			c.Close()
			return err
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil && line == "" {
				return
			}
			fmt.Fprintf(c, "echo: %s\n", strings.TrimRight(line, "\r\n"))
		}()
	}
}

// serveUDP answers every datagram on address with text and a newline (a UDP Service's backend,
// which names itself), until the process is killed.
func serveUDP(address, text string, stdout io.Writer) error {
	c, err := net.ListenPacket("udp", address)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "listening %s\n", c.LocalAddr()); err != nil {
		return err
	}
	buf := make([]byte, 64*1024)
	for {
		_, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		c.WriteTo([]byte(text+"\n"), from)
	}
}

// connectRetry is how long connect keeps trying while the server is not there yet.
const connectRetry = 10 * time.Second

// connect sends msg to the echo server at address and prints its answer.
func connect(address, msg string, stdout io.Writer) error {
	deadline := time.Now().Add(connectRetry)
	var c net.Conn
	var err error
	for {
		c, err = net.DialTimeout("tcp", address, 2*time.Second)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	_, err = io.WriteString(stdout, line)
	return err
}

// serveHTTP answers every HTTP request on address with 200 and text (what a kubelet probe or a
// client of a hostPort reads), one request a connection, until the process is killed. The
// response is written by hand: net/http would more than double the workload's size, which every
// test image carries.
func serveHTTP(address, text string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "listening %s\n", ln.Addr()); err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			r := bufio.NewReader(c)
			// The request line and headers, up to the empty line; a GET has no body.
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.TrimRight(line, "\r\n") == "" {
					break
				}
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(text), text)
		}()
	}
}

// get GETs the http:// URL count times, each on a new connection (so that a load balancer
// chooses a backend for each), and prints each answer's body on a line: with servers that
// answer their own name, which backend served each request. A request that fails prints
// "error: …" on its line and get goes on; get fails if any did. Written by hand, as serveHTTP.
func get(rawURL string, count int, stdout io.Writer) error {
	hostPath, ok := strings.CutPrefix(rawURL, "http://")
	if !ok {
		return usageError{fmt.Sprintf("URL %q: want http://HOST:PORT/PATH", rawURL)}
	}
	host, path, _ := strings.Cut(hostPath, "/")
	if _, _, err := net.SplitHostPort(host); err != nil {
		return usageError{fmt.Sprintf("URL %q: %v", rawURL, err)}
	}
	failed := 0
	for range count {
		body, err := getOnce(host, "/"+path)
		if err != nil {
			failed++
			body = "error: " + err.Error()
		}
		if _, err := fmt.Fprintln(stdout, body); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d requests to %s failed", failed, count, rawURL)
	}
	return nil
}

func getOnce(host, path string) (string, error) {
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	head, body, ok := strings.Cut(string(b), "\r\n\r\n")
	if !ok {
		return "", fmt.Errorf("no HTTP answer: %q", b)
	}
	if status, _, _ := strings.Cut(head, "\r\n"); !strings.Contains(status, " 200 ") {
		return "", fmt.Errorf("answer %q", status)
	}
	return body, nil
}

// resolve looks NAME up with the system's resolver and prints its IPv4 addresses, one a line,
// sorted. The Linux build's resolver is Go's own (the binary is static): under hcsemu it reads
// the container's C:\etc\resolv.conf, where hcsemu writes the pod's DNS settings
// (internal/hcsemu/compute dns_linux.go).
func resolve(name string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", name)
	if err != nil {
		return err
	}
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	slices.Sort(out)
	for _, a := range out {
		fmt.Fprintln(stdout, a)
	}
	return nil
}
