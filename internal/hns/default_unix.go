//go:build unix

package hns

import (
	"github.com/openhcs/runhcs/internal/computenetwork"
	"github.com/openhcs/runhcs/internal/hcsemu/client"
)

// DefaultAPI returns the HNS of this platform: on Linux, the hcsemu daemon at $HCSEMU_ADDRESS
// (or its default socket).
func DefaultAPI() (computenetwork.API, error) { return client.NewHNS() }
