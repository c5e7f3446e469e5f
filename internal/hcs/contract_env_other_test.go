//go:build !linux && !windows

package hcs

import "testing"

type contractEnv struct {
	hcs   *Client
	addr  string
	image string
}

// requireContract: the contract tests are written against the HCS contract and could run on
// real HCS, but that needs a mounted container volume and a Windows build of the workload that
// this suite does not provision yet.
func requireContract(t *testing.T) *contractEnv {
	t.Skip("the HCS contract suite provisions its environment (hcsemu, test image) on Linux only")
	return nil
}

func (env *contractEnv) hostDir(t *testing.T) (local, host string) {
	d := t.TempDir()
	return d, d
}
