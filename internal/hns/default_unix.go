//go:build unix

package hns

import (
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
)

// DefaultAPI returns the HNS of this platform: on Linux, the hcsemu daemon at $HCSEMU_ADDRESS
// (or its default socket).
func DefaultAPI() (computenetwork.API, error) {
	c, err := client.NewHNS()
	if err != nil {
		return nil, err // not c: a nil *client.HNSClient would be a non-nil API
	}
	return c, nil
}
