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
	if _, err := os.Stat(kubeletArgsFile(root)); !os.IsNotExist(err) {
		t.Errorf("restart made %s: %v", kubeletArgsFile(root), err)
	}
}
