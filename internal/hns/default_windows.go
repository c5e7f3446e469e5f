package hns

import "github.com/openhcs/runhcs/internal/computenetwork"

// DefaultAPI returns the HNS of this platform: computenetwork.dll and vmcompute.dll.
func DefaultAPI() (computenetwork.API, error) { return computenetwork.New() }
