package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// WorkloadPackage is the import path of the workload program.
const WorkloadPackage = "github.com/openhcs/runhcs/test/workload"

// BuildWorkload builds the workload for goos/goarch into out, statically (CGO_ENABLED=0) so it
// runs in a container with nothing else. It must run inside the runhcs module (any folder of it).
// Linux builds are what hcsemu runs; Windows builds are for real hosts.
func BuildWorkload(ctx context.Context, goos, goarch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, WorkloadPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build workload for %s/%s: %w: %s", goos, goarch, err, strings.TrimSpace(string(b)))
	}
	return nil
}
