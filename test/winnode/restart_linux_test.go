//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openhcs/runhcs/test/internal/rootdir"
)

// TestRestartBadInput checks that `winnode restart` names what is wrong and touches nothing:
// an unknown service, no service, and a kubelet that was never started by `winnode kubelet`.
func TestRestartBadInput(t *testing.T) {
	root := t.TempDir()
	if err := rootdir.WriteEnv(envFile(root), [][2]string{{"RUNHCS_NODE_ROOT", root}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", root, "kubelett"}, `service "kubelett"`},
		{[]string{"--root", root}, "want one service"},
		{[]string{"--root", "relative", "kubelet"}, `--root "relative"`},
		{[]string{"--root", root, "kubelet"}, "kubelet.args.json is missing"},
		{[]string{"--root", filepath.Join(root, "none"), "kubelet"}, "no node at"},
	} {
		err := restartCmd(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("restart %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(kubeletAgent.argsFile(root)); !os.IsNotExist(err) {
		t.Errorf("restart made %s: %v", kubeletAgent.argsFile(root), err)
	}
}

// TestRemoveStaleSockets checks that only winesock.c's socket files leave kubelet's
// device-plugin folder: the checkpoint and other files stay, as kubelet keeps them on Windows.
func TestRemoveStaleSockets(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kubelet.sock":                "runhcs-wine-afunix 40123",
		"vendor.sock":                 "runhcs-wine-afunix 40124",
		"kubelet_internal_checkpoint": `{"Data":{}}`,
		"short":                       "runhcs",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeStaleSockets(dir); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone, want := os.IsNotExist(err), strings.HasSuffix(name, ".sock"); gone != want {
			t.Errorf("%s: removed %v, want %v", name, gone, want)
		}
	}
	if err := removeStaleSockets(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing folder: %v", err)
	}
}

// TestKubeProxySynced: kube-proxy counts as synced only once its IPv4 proxier's last-sync
// timestamp is set; the IPv6 proxier's, a zero value and comments do not count.
func TestKubeProxySynced(t *testing.T) {
	for _, c := range []struct {
		metrics string
		want    bool
	}{
		{"", false},
		{"# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds x\n# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n", false},
		{`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 0` + "\n", false},
		{`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7e+09` + "\n", false},
		{`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7e+09` + "\n" +
			`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7642271e+09` + "\n", true},
	} {
		if got := synced(c.metrics); got != c.want {
			t.Errorf("synced(%q) = %v, want %v", c.metrics, got, c.want)
		}
	}
}
