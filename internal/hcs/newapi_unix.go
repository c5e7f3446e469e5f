//go:build unix

package hcs

import (
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
)

// newAPI is the hcsemu daemon's client: off Windows there is no computecore.dll, and the
// emulator serves the same API (see docs/emulator.md, "The contract").
func newAPI() (computecore.API, error) {
	c, err := client.NewHCS()
	if err != nil {
		return nil, err // not c: a nil *client.HCS would be a non-nil API
	}
	return c, nil
}
