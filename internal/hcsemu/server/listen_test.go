package server

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestValidateTCPAddress(t *testing.T) {
	tests := []struct {
		address string
		ok      bool
	}{
		{"127.0.0.1:0", true},
		{"127.0.0.1:9345", true},
		{"127.10.20.30:65535", true},
		{"[::1]:0", true},
		{"0.0.0.0:0", false},
		{"[::]:9345", false},
		{"192.0.2.1:9345", false},
		{"localhost:9345", false}, // a name could resolve to anything
		{":9345", false},          // every interface
		{"127.0.0.1", false},
		{"127.0.0.1:", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:http", false},
		{"nonsense", false},
		{"", false},
	}
	for _, tc := range tests {
		err := ValidateTCPAddress(tc.address)
		if tc.ok {
			if err != nil {
				t.Errorf("ValidateTCPAddress(%q) = %v, want ok", tc.address, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ValidateTCPAddress(%q) accepted it", tc.address)
			continue
		}
		if !strings.Contains(err.Error(), `--tcp-address "`+tc.address+`"`) || !errdefs.IsInvalidArgument(err) {
			t.Errorf("ValidateTCPAddress(%q) = %q: want an invalid-argument error naming the flag and value", tc.address, err)
		}
	}
}

func TestAddressesValidate(t *testing.T) {
	tests := []struct {
		name  string
		addrs Addresses
		want  string // "" for valid
	}{
		{"unix only", Addresses{Unix: "/run/hcsemu/hcsemu.sock"}, ""},
		{"unix and tcp", Addresses{Unix: "/s", TCP: "127.0.0.1:0", TCPFile: "/tmp/a", TCPKeyFile: "/tmp/k"}, ""},
		{"tcp without address file", Addresses{Unix: "/s", TCP: "127.0.0.1:9345", TCPKeyFile: "/tmp/k"}, ""},
		{"no unix", Addresses{TCP: "127.0.0.1:0", TCPKeyFile: "/tmp/k"}, "--address"},
		{"non-loopback tcp", Addresses{Unix: "/s", TCP: "0.0.0.0:1", TCPKeyFile: "/tmp/k"}, `--tcp-address "0.0.0.0:1"`},
		{"tcp without key file", Addresses{Unix: "/s", TCP: "127.0.0.1:0", TCPFile: "/tmp/a"}, `--tcp-address "127.0.0.1:0" without --tcp-key-file`},
		{"file without tcp", Addresses{Unix: "/s", TCPFile: "/tmp/a"}, `--tcp-address-file "/tmp/a" without --tcp-address`},
		{"key file without tcp", Addresses{Unix: "/s", TCPKeyFile: "/tmp/k"}, `--tcp-key-file "/tmp/k" without --tcp-address`},
	}
	for _, tc := range tests {
		err := tc.addrs.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errdefs.IsInvalidArgument(err)):
			t.Errorf("%s: %v, want an invalid-argument error containing %q", tc.name, err, tc.want)
		}
	}
}
