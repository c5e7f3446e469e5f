//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpInstallsPackages checks that hack/winnode.sh installs what the node needs beyond Wine,
// as it installs Wine (issue 21, item 6: on a fresh machine up stopped at the HNS network for
// want of nft): `deps`, which up runs first, asks apt-get for nftables when nft is missing, and
// runs no apt-get when it is there. apt-get and id are stand-ins on PATH that record their
// calls; PATH holds /usr/bin and /bin but not /usr/sbin, where Debian's nft lives.
func TestUpInstallsPackages(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "winnode.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		nft, root bool
		want      string // apt-get's calls, or the message
		fail      bool
	}{
		{name: "nft missing", root: true, want: "update -qq\ninstall -y -qq --no-install-recommends nftables\n"},
		{name: "nft there", nft: true, root: true, want: ""},
		{name: "nft missing, not root", want: "winnode: need Debian packages nftables; run as root or install them", fail: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			calls := filepath.Join(t.TempDir(), "apt-get.calls")
			stub := func(name, body string) {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			stub("apt-get", `echo "$*" >>"`+calls+`"`)
			uid := "1000"
			if c.root {
				uid = "0"
			}
			stub("id", "echo "+uid)
			if c.nft {
				stub("nft", "exit 0")
			}
			cmd := exec.Command("bash", script, "deps")
			cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
			out, err := cmd.CombinedOutput()
			if c.fail {
				if err == nil || !strings.Contains(string(out), c.want) {
					t.Fatalf("deps: %v, %q; want a failure saying %q", err, out, c.want)
				}
				if _, err := os.Stat(calls); err == nil {
					t.Fatal("apt-get ran as another user than root")
				}
				return
			}
			if err != nil {
				t.Fatalf("deps: %v\n%s", err, out)
			}
			got, _ := os.ReadFile(calls)
			if string(got) != c.want {
				t.Fatalf("apt-get calls %q; want %q (output %q)", got, c.want, out)
			}
		})
	}
}
