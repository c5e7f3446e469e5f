package hcs

import "github.com/openhcs/runhcs/internal/computecore"

// newAPI is computecore.dll, through the bindings in internal/computecore.
func newAPI() (computecore.API, error) { return computecore.New() }
