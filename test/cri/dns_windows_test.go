//go:build windows

package cri

import (
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPodDNS: a pod's dns_config reaches its containers as on Windows, in both isolations.
// containerd's CRI passes the servers and searches to win-bridge as runtimeConfig.dns (the
// node's CNI configuration has the dns capability), win-bridge writes them into the HNS
// endpoint's Dns, and the container's network adapter has them: ipconfig /all prints the DNS
// servers and the suffix in Windows' format, and C:\etc\resolv.conf (hcsemu's convention, for a
// Linux resolver) names the server and one search suffix with ndots:1. The pod's ndots:8 is not
// applied: Windows' resolver has no such option, and win-bridge passes a runtime's servers and
// searches only.
func TestPodDNS(t *testing.T) {
	n := connect(t)
	for _, c := range []struct{ name, handler string }{{"process", ""}, {"hyperv", hypervHandler}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := podConfig(t, "pod-dns-"+c.name)
			cfg.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.10.10.10"}, Searches: []string{"google.com"}, Options: []string{"ndots:8"}}
			pod := runPodConfig(t, n, cfg, c.handler)

			s, log := runToEnd(t, n, pod, cfg, "ipconfig", "ipconfig", "/all")
			out := trimCR(logLines(log, "stdout"))
			for _, want := range []string{
				"   DNS Suffix Search List. . . . . . : google.com",
				"   Connection-specific DNS Suffix  . : google.com",
				"   DNS Servers . . . . . . . . . . . : 10.10.10.10",
			} {
				if s.GetExitCode() != 0 || !slices.Contains(out, want) {
					t.Errorf("ipconfig /all: exit code %d, no line %q in\n%s", s.GetExitCode(), want, strings.Join(out, "\n"))
				}
			}

			s, log = runToEnd(t, n, pod, cfg, "resolv", "cmd", "/c", "type", `C:\etc\resolv.conf`)
			var conf []string
			for _, l := range trimCR(logLines(log, "stdout")) {
				if !strings.HasPrefix(l, "#") && l != "" {
					conf = append(conf, l)
				}
			}
			if want := []string{"nameserver 10.10.10.10", "search google.com", "options ndots:1"}; s.GetExitCode() != 0 || !slices.Equal(conf, want) {
				t.Errorf("type C:\\etc\\resolv.conf: exit code %d, resolver lines %q; want %q", s.GetExitCode(), conf, want)
			}
		})
	}
}

// trimCR drops the carriage returns that end the lines of Windows tools' output.
func trimCR(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l, "\r")
	}
	return out
}
