package wintest

import (
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// sioUDPNetReset is SIO_UDP_NETRESET (IOC_IN | IOC_VENDOR | 15; mstcpip.h).
const sioUDPNetReset = 0x9800000F

// TestUDPNetReset: Go opens every UDP socket with WSAIoctl(SIO_UDP_CONNRESET) and
// WSAIoctl(SIO_UDP_NETRESET) set to FALSE, which Windows 8 and later accept. A UDP server and
// client on loopback then exchange a datagram each way. On a TCP socket, SIO_UDP_NETRESET is
// still refused. Under Wine 8, which refuses SIO_UDP_NETRESET on every socket,
// hack/wine/winesock.c accepts it on UDP sockets.
func TestUDPNetReset(t *testing.T) {
	srv, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("net.ListenPacket(udp): %v", err)
	}
	defer srv.Close()
	c, err := net.Dial("udp", srv.LocalAddr().String())
	if err != nil {
		t.Fatalf("net.Dial(udp): %v", err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	srv.SetDeadline(deadline)
	c.SetDeadline(deadline)
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, from, err := srv.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("server read %q, %v; want ping", buf[:n], err)
	}
	if _, err := srv.WriteTo([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	if n, err = c.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("client read %q, %v; want pong", buf[:n], err)
	}

	// A TCP socket has no such control: Windows refuses it (WSAEOPNOTSUPP or WSAEINVAL).
	tcp, err := windows.Socket(windows.AF_INET, windows.SOCK_STREAM, windows.IPPROTO_TCP)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.Closesocket(tcp)
	flag, ret := uint32(0), uint32(0)
	if err := windows.WSAIoctl(tcp, sioUDPNetReset, (*byte)(unsafe.Pointer(&flag)), uint32(unsafe.Sizeof(flag)), nil, 0, &ret, nil, 0); err == nil {
		t.Error("WSAIoctl(SIO_UDP_NETRESET) on a TCP socket succeeded; want a refusal")
	}
}
