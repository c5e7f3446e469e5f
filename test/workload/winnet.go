package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// hostsFile is where Windows reads static host names.
const hostsFile = `C:\Windows\System32\drivers\etc\hosts`

// hostnameMain is hostname.exe: the computer name. Like the real one it refuses arguments
// (which would set the name).
func hostnameMain(args []string, t *tool) int {
	t.name = "hostname"
	if len(args) > 0 {
		return t.unsupported("hostname with arguments")
	}
	h, err := os.Hostname()
	if err != nil {
		fmt.Fprintf(t.stderr, "hostname: %v\r\n", err)
		return 1
	}
	fmt.Fprintf(t.stdout, "%s\r\n", h)
	return 0
}

// resolvConfFile is where hcsemu writes a container's DNS settings (the emulator's convention,
// internal/hcsemu/compute dns_linux.go): the resolver's lines, and per network adapter a comment line
// "# hcsemu-adapter <MAC> suffix=<suffix> servers=<a>,<b>". A variable for tests.
var resolvConfFile = `C:\etc\resolv.conf`

// dnsConfig is what ipconfig shows of DNS: the suffix search list, and per adapter (by its MAC
// address as ipconfig prints it) the connection-specific suffix and the servers.
type dnsConfig struct {
	search   []string
	adapters map[string]adapterDNS
}

type adapterDNS struct {
	suffix  string
	servers []string
}

// readDNSConfig reads resolvConfFile; a container without one (not under hcsemu, or in no
// network) has no DNS settings to show.
func readDNSConfig() dnsConfig {
	c := dnsConfig{adapters: map[string]adapterDNS{}}
	p, _, ok := findFold(hostPath(resolvConfFile))
	if !ok {
		return c
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return c
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "#" && f[1] == "hcsemu-adapter":
			var a adapterDNS
			for _, kv := range f[3:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "suffix":
					a.suffix = v
				case "servers":
					if v != "" {
						a.servers = strings.Split(v, ",")
					}
				}
			}
			c.adapters[strings.ToUpper(f[2])] = a
		case len(f) >= 2 && f[0] == "search":
			c.search = f[1:]
		}
	}
	return c
}

// ipconfigMain is `ipconfig` and `ipconfig /all`: every interface that is up, except loopback
// (which ipconfig does not list), with its connection-specific DNS suffix, IPv4 and IPv6
// addresses, masks and, with /all, the host name, the DNS suffix search list, the physical
// address and the DNS servers (from resolvConfFile). Default gateways are not shown: the
// stand-in does not know them.
func ipconfigMain(args []string, t *tool) int {
	t.name = "ipconfig"
	all := false
	switch {
	case len(args) == 0:
	case len(args) == 1 && (strings.EqualFold(args[0], "/all") || strings.EqualFold(args[0], "-all")):
		all = true
	default:
		return t.unsupported("ipconfig " + strings.Join(args, " "))
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		fmt.Fprintf(t.stderr, "ipconfig: %v\r\n", err)
		return 1
	}
	w := t.stdout
	fmt.Fprint(w, "\r\nWindows IP Configuration\r\n\r\n")
	line := func(label, value string) {
		fmt.Fprintf(w, "   %s: %s\r\n", ipconfigLabels[label], value)
	}
	// lines prints a list as ipconfig does: the first value on the label's line, the others
	// each on a line of its own, aligned under it.
	lines := func(label string, values []string) {
		for i, v := range values {
			if i == 0 {
				line(label, v)
				continue
			}
			fmt.Fprintf(w, "%s%s\r\n", strings.Repeat(" ", 3+len(ipconfigLabels[label])+2), v)
		}
	}
	dns := readDNSConfig()
	if all {
		h, _ := os.Hostname()
		line("Host Name", h)
		lines("DNS Suffix Search List", dns.search)
		fmt.Fprint(w, "\r\n")
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 {
			continue
		}
		fmt.Fprintf(w, "Ethernet adapter %s:\r\n\r\n", ifc.Name)
		mac := strings.ToUpper(strings.ReplaceAll(ifc.HardwareAddr.String(), ":", "-"))
		adapter := dns.adapters[mac]
		line("Connection-specific DNS Suffix", adapter.suffix)
		if all {
			line("Physical Address", mac)
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip4 := ipn.IP.To4(); ip4 != nil {
				v := ip4.String()
				if all {
					v += "(Preferred)"
				}
				line("IPv4 Address", v)
				line("Subnet Mask", net.IP(ipn.Mask).String())
			} else if ipn.IP.IsLinkLocalUnicast() {
				line("Link-local IPv6 Address", ipn.IP.String())
			} else {
				line("IPv6 Address", ipn.IP.String())
			}
		}
		if all {
			// After the addresses, as ipconfig /all orders an adapter's lines.
			lines("DNS Servers", adapter.servers)
		}
		fmt.Fprint(w, "\r\n")
	}
	return 0
}

// ipconfigLabels are ipconfig's labels with their dot leaders, as it prints them in English.
var ipconfigLabels = map[string]string{
	"Host Name":                      "Host Name . . . . . . . . . . . . ",
	"Connection-specific DNS Suffix": "Connection-specific DNS Suffix  . ",
	"Physical Address":               "Physical Address. . . . . . . . . ",
	"IPv4 Address":                   "IPv4 Address. . . . . . . . . . . ",
	"Subnet Mask":                    "Subnet Mask . . . . . . . . . . . ",
	"Link-local IPv6 Address":        "Link-local IPv6 Address . . . . . ",
	"IPv6 Address":                   "IPv6 Address. . . . . . . . . . . ",
	"DNS Suffix Search List":         "DNS Suffix Search List. . . . . . ",
	"DNS Servers":                    "DNS Servers . . . . . . . . . . . ",
}

// pingMain is ping.exe for IPv4: `ping [-t] [-n COUNT] [-w TIMEOUT_MS] [-4] HOST`, one echo
// request a second, ping's lines and statistics, exit code 0 if a reply came, else 1. -t pings
// until the process is stopped; Ctrl+C (SIGINT) prints the statistics and "Control-C", as
// ping does. Names are looked up in the hosts file, and "localhost" is 127.0.0.1 (Windows
// resolves it itself, and prefers ::1; the stand-in has no IPv6 ping).
func pingMain(args []string, t *tool) int {
	t.name = "ping"
	count, timeout, forever := 4, 4*time.Second, false
	var target string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) > 1 && (a[0] == '-' || a[0] == '/') {
			switch strings.ToLower(a[1:]) {
			case "t":
				forever = true
				continue
			case "4":
				continue
			case "n", "w":
				if i+1 >= len(args) {
					fmt.Fprintf(t.stderr, "Value must be supplied for option %s.\r\n", a)
					return 1
				}
				n, err := strconv.Atoi(args[i+1])
				if err != nil || n <= 0 {
					fmt.Fprintf(t.stderr, "Bad value for option %s, valid range is from 1 to 4294967295.\r\n", a)
					return 1
				}
				if strings.EqualFold(a[1:], "n") {
					count = n
				} else {
					timeout = time.Duration(n) * time.Millisecond
				}
				i++
				continue
			}
			return t.unsupported("the option " + a)
		}
		if target != "" {
			return t.unsupported("more than one target")
		}
		target = a
	}
	if target == "" {
		return t.unsupported("ping without a target")
	}
	ip := resolveHost(target)
	if ip == nil {
		fmt.Fprintf(t.stdout, "Ping request could not find host %s. Please check the name and try again.\r\n", target)
		return 1
	}
	w := t.stdout
	if target == ip.String() {
		fmt.Fprintf(w, "\r\nPinging %s with 32 bytes of data:\r\n", ip)
	} else {
		fmt.Fprintf(w, "\r\nPinging %s [%s] with 32 bytes of data:\r\n", target, ip)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	var sent, received int
	var rtts []time.Duration
	stats := func() {
		fmt.Fprintf(w, "\r\nPing statistics for %s:\r\n", ip)
		lost := sent - received
		pct := 0
		if sent > 0 {
			pct = lost * 100 / sent
		}
		fmt.Fprintf(w, "    Packets: Sent = %d, Received = %d, Lost = %d (%d%% loss),\r\n", sent, received, lost, pct)
		if len(rtts) > 0 {
			lo, hi, sum := rtts[0], rtts[0], time.Duration(0)
			for _, r := range rtts {
				lo, hi, sum = min(lo, r), max(hi, r), sum+r
			}
			ms := func(d time.Duration) int64 { return d.Milliseconds() }
			fmt.Fprintf(w, "Approximate round trip times in milli-seconds:\r\n    Minimum = %dms, Maximum = %dms, Average = %dms\r\n", ms(lo), ms(hi), ms(sum/time.Duration(len(rtts))))
		}
	}
	pinger, err := newPinger(ip)
	if err != nil {
		fmt.Fprintf(t.stderr, "ping: %v\r\n", err)
	}
	for seq := 1; forever || seq <= count; seq++ {
		if seq > 1 {
			select {
			case <-stop:
				stats()
				fmt.Fprint(w, "Control-C\r\n^C")
				// Windows' code is STATUS_CONTROL_C_EXIT (0xC000013A), which a Linux exit
				// status (8 bits) cannot carry; 1 says "failed" all the same.
				return 1
			case <-time.After(time.Second):
			}
		}
		sent++
		if pinger == nil {
			fmt.Fprint(w, "PING: transmit failed. General failure. \r\n")
			continue
		}
		rtt, ttl, err := pinger.echo(seq, timeout)
		switch {
		case err == errPingTimeout:
			fmt.Fprint(w, "Request timed out.\r\n")
		case err != nil:
			fmt.Fprint(w, "PING: transmit failed. General failure. \r\n")
		default:
			received++
			rtts = append(rtts, rtt)
			when := "time<1ms"
			if rtt >= time.Millisecond {
				when = fmt.Sprintf("time=%dms", rtt.Milliseconds())
			}
			fmt.Fprintf(w, "Reply from %s: bytes=32 %s TTL=%d\r\n", ip, when, ttl)
		}
	}
	stats()
	if received == 0 {
		return 1
	}
	return 0
}

// resolveHost finds an IPv4 address for a name as Windows' resolver does for ping: a literal,
// "localhost", the hosts file, then DNS (the system's resolver: under hcsemu the pod's DNS
// settings in C:\etc\resolv.conf, with its one suffix).
func resolveHost(name string) net.IP {
	if ip := resolveLocal(name); ip != nil {
		return ip
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", name)
	if err != nil || len(ips) == 0 {
		return nil
	}
	return ips[0].To4()
}

// resolveLocal finds an IPv4 address for a name without DNS: a literal, "localhost", or the
// hosts file.
func resolveLocal(name string) net.IP {
	if ip := net.ParseIP(name); ip != nil {
		return ip.To4()
	}
	if strings.EqualFold(name, "localhost") {
		return net.IPv4(127, 0, 0, 1).To4()
	}
	p, _, ok := findFold(hostPath(hostsFile))
	if !ok {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		for _, n := range fields[1:] {
			if strings.EqualFold(n, name) {
				if ip := net.ParseIP(fields[0]).To4(); ip != nil {
					return ip
				}
			}
		}
	}
	return nil
}

var errPingTimeout = fmt.Errorf("request timed out")
