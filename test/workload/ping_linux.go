package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pinger sends ICMP echo requests (RFC 792) over a raw socket, which a process with
// CAP_NET_RAW may open (ContainerAdministrator under hcsemu), or else a datagram ICMP socket,
// which Linux allows to the groups of net.ipv4.ping_group_range.
type pinger struct {
	fd  int
	raw bool // replies carry the IP header (raw); else the TTL comes as IP_TTL control data
	to  unix.SockaddrInet4
	id  uint16
}

func newPinger(ip net.IP) (*pinger, error) {
	p := &pinger{id: uint16(os.Getpid())}
	copy(p.to.Addr[:], ip.To4())
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err == nil {
		p.fd, p.raw = fd, true
		return p, nil
	}
	fd, err2 := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if err2 != nil {
		return nil, fmt.Errorf("no ICMP socket: raw: %v; datagram: %v", err, err2)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	p.fd = fd
	return p, nil
}

// echo sends one request with 32 bytes of data (ping's default) and waits for its reply.
func (p *pinger) echo(seq int, timeout time.Duration) (time.Duration, int, error) {
	msg := make([]byte, 8+32)
	msg[0] = 8 // echo request
	binary.BigEndian.PutUint16(msg[4:], p.id)
	binary.BigEndian.PutUint16(msg[6:], uint16(seq))
	for i := 8; i < len(msg); i++ {
		msg[i] = 'a' + byte((i-8)%23) // Windows' payload: "abcdefghijklmnopqrstuvw…"
	}
	binary.BigEndian.PutUint16(msg[2:], icmpChecksum(msg))
	start := time.Now()
	if err := unix.Sendto(p.fd, msg, 0, &p.to); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 1500)
	oob := make([]byte, 64)
	deadline := start.Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, 0, errPingTimeout
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(p.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return 0, 0, err
		}
		n, oobn, _, _, err := unix.Recvmsg(p.fd, buf, oob, 0)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		reply, ttl := buf[:n], 0
		if p.raw {
			if n < 20 {
				continue
			}
			hl := int(reply[0]&0x0f) * 4
			if n < hl+8 {
				continue
			}
			ttl, reply = int(reply[8]), reply[hl:]
		} else if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TTL && len(m.Data) >= 4 {
					ttl = int(binary.NativeEndian.Uint32(m.Data))
				}
			}
		}
		// An echo reply (type 0) to this request; a datagram socket rewrites the id itself.
		if len(reply) < 8 || reply[0] != 0 || binary.BigEndian.Uint16(reply[6:]) != uint16(seq) ||
			p.raw && binary.BigEndian.Uint16(reply[4:]) != p.id {
			continue
		}
		return time.Since(start), ttl, nil
	}
}

// icmpChecksum is the Internet checksum (RFC 1071) of b.
func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
