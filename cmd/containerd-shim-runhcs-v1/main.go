// Command containerd-shim-runhcs-v1 is the containerd shim of runtime type
// io.containerd.runhcs.v1: it runs process-isolated Windows containers through the Host
// Compute Service (or, on Linux, its emulator hcsemu). Everything lives in internal/shim.
package main

import (
	"context"

	"github.com/openhcs/runhcs/internal/shim"
)

func main() {
	shim.Run(context.Background())
}
