package stdio

import (
	"context"
	"fmt"
	"net/url"

	"github.com/containerd/errdefs"
)

// openBinary: logging binaries on Windows get their streams as named pipes in hcsshim; that
// protocol is not implemented yet.
func openBinary(_ context.Context, _, _ string, u *url.URL, _ *Upstream) error {
	return fmt.Errorf("logging binary %q: binary:// logging on Windows: %w", u.String(), errdefs.ErrNotImplemented)
}
