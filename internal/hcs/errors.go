package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
)

// sentinel is one of the Err… values: a message, and the errdefs kind it also is.
type sentinel struct {
	msg  string
	kind error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.kind }

// The sentinels. errors.Is(err, ErrX) holds for an *Error whose HRESULT maps to ErrX (see
// sentinelFor); each sentinel is also its errdefs kind.
var (
	ErrNotFound              error = &sentinel{"compute system not found", errdefs.ErrNotFound}
	ErrAlreadyExists         error = &sentinel{"compute system already exists", errdefs.ErrAlreadyExists}
	ErrInvalidState          error = &sentinel{"invalid state for the operation", errdefs.ErrFailedPrecondition}
	ErrAlreadyStopped        error = &sentinel{"compute system already stopped", errdefs.ErrFailedPrecondition}
	ErrProcessAlreadyStopped error = &sentinel{"process already stopped", errdefs.ErrFailedPrecondition}
	ErrOperationPending      error = &sentinel{"operation still pending", errdefs.ErrUnavailable}
	ErrAccessDenied          error = &sentinel{"access denied", errdefs.ErrPermissionDenied}
	ErrUnexpectedExit        error = &sentinel{"compute system exited unexpectedly", errdefs.ErrAborted}
	ErrServiceDisconnected   error = &sentinel{"disconnected from the compute service", errdefs.ErrUnavailable}
	// ErrClosed is returned by calls on a System or Process after its Close.
	ErrClosed error = &sentinel{"handle already closed", errdefs.ErrFailedPrecondition}
)

// IsGone reports whether err says the compute system or process does not exist or has already
// stopped (ErrNotFound, ErrAlreadyStopped, ErrProcessAlreadyStopped): what callers that end
// something treat as done.
func IsGone(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyStopped) || errors.Is(err, ErrProcessAlreadyStopped)
}

// HCS returns E_ELEMENT_NOT_FOUND (HRESULT_FROM_WIN32(ERROR_NOT_FOUND)) for some lookups; hcsshim's
// internal/hcs/errors.go treats it as "does not exist", like HCS_E_SYSTEM_NOT_FOUND.

// sentinelFor maps an HRESULT to a sentinel, or nil.
func sentinelFor(hr computecore.HRESULT) error {
	switch {
	case hr.Is(computecore.HCS_E_SYSTEM_NOT_FOUND), hr.Is(computecore.E_ELEMENT_NOT_FOUND):
		return ErrNotFound
	case hr.Is(computecore.HCS_E_SYSTEM_ALREADY_EXISTS):
		return ErrAlreadyExists
	case hr.Is(computecore.HCS_E_INVALID_STATE):
		return ErrInvalidState
	case hr.Is(computecore.HCS_E_SYSTEM_ALREADY_STOPPED):
		return ErrAlreadyStopped
	case hr.Is(computecore.HCS_E_PROCESS_ALREADY_STOPPED):
		return ErrProcessAlreadyStopped
	case hr.Is(computecore.HCS_E_OPERATION_PENDING):
		return ErrOperationPending
	case hr.Is(computecore.HCS_E_ACCESS_DENIED), hr.Is(computecore.E_ACCESSDENIED):
		return ErrAccessDenied
	case hr.Is(computecore.HCS_E_UNEXPECTED_EXIT):
		return ErrUnexpectedExit
	case hr.Is(computecore.HCS_E_SERVICE_DISCONNECT), hr.Is(computecore.HCS_E_SERVICE_NOT_AVAILABLE),
		hr.Is(computecore.HCS_E_CONNECTION_CLOSED):
		return ErrServiceDisconnected
	}
	return nil
}

// kindFor maps the HRESULTs that have no sentinel to an errdefs kind, or nil.
func kindFor(hr computecore.HRESULT) error {
	switch {
	case hr.Is(computecore.E_FILE_NOT_FOUND), hr.Is(computecore.E_PATH_NOT_FOUND):
		return errdefs.ErrNotFound // CreateProcess of a missing executable or working directory
	case hr.Is(computecore.E_INVALIDARG), hr.Is(computecore.HCS_E_INVALID_JSON), hr.Is(computecore.HCS_E_INVALID_LAYER):
		return errdefs.ErrInvalidArgument
	case hr.Is(computecore.HCS_E_IMAGE_MISMATCH), hr.Is(computecore.HCS_E_HYPERV_NOT_INSTALLED),
		hr.Is(computecore.HCS_E_SYSTEM_NOT_CONFIGURED_FOR_OPERATION), hr.Is(computecore.HCS_E_PROCESS_INFO_NOT_AVAILABLE):
		return errdefs.ErrFailedPrecondition
	case hr.Is(computecore.E_NOTIMPL), hr.Is(computecore.E_NOT_SUPPORTED):
		return errdefs.ErrNotImplemented
	case hr.Is(computecore.HCS_E_OPERATION_TIMEOUT), hr.Is(computecore.HCS_E_CONNECTION_TIMEOUT), hr.Is(computecore.E_WAIT_TIMEOUT):
		return context.DeadlineExceeded // errdefs.IsDeadlineExceeded matches it
	case hr.Is(computecore.HCS_E_OPERATION_ALREADY_CANCELLED):
		return context.Canceled // errdefs.IsCanceled matches it
	case hr.Is(computecore.HCS_E_TERMINATED), hr.Is(computecore.HCS_E_TERMINATED_DURING_START):
		return errdefs.ErrAborted
	case hr.Is(computecore.HCS_E_CONNECT_FAILED):
		return errdefs.ErrUnavailable
	case hr.Is(computecore.E_OUTOFMEMORY):
		return errdefs.ErrResourceExhausted
	}
	return nil
}

// Error is the error of every call of this package.
type Error struct {
	Op     string // the computecore call, without its Hcs prefix: "CreateComputeSystem", "Start", …
	ID     string // the compute system's id ("" for calls on the service)
	Pid    uint32 // the process, or 0
	Err    error  // the HRESULT (a computecore.HRESULT), or the context's error, or a client failure
	Detail string // what the HCS result document said, if anything
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("hcs ")
	b.WriteString(e.Op)
	if e.ID != "" {
		fmt.Fprintf(&b, " %q", e.ID)
	}
	if e.Pid != 0 {
		fmt.Fprintf(&b, " pid %d", e.Pid)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown error")
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap returns the underlying error and, when the HRESULT has one, its sentinel or errdefs
// kind, so that errors.Is sees all of them.
func (e *Error) Unwrap() []error {
	errs := []error{e.Err}
	var hr computecore.HRESULT
	if errors.As(e.Err, &hr) {
		if s := sentinelFor(hr); s != nil {
			errs = append(errs, s)
		} else if k := kindFor(hr); k != nil {
			errs = append(errs, k)
		}
	}
	return errs
}

// HRESULT returns the error's HRESULT, or 0 if it has none.
func (e *Error) HRESULT() computecore.HRESULT {
	var hr computecore.HRESULT
	if errors.As(e.Err, &hr) {
		return hr
	}
	return 0
}

// resultDetail extracts the human part of an HCS result document: its ErrorMessage and the
// messages of its ErrorEvents. A document that is not a ResultError is returned as it is.
func resultDetail(doc string) string {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return ""
	}
	var r schema2.ResultError
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return doc
	}
	var parts []string
	if r.ErrorMessage != "" {
		parts = append(parts, r.ErrorMessage)
	}
	for _, ev := range r.ErrorEvents {
		if ev.Message != "" && ev.Message != r.ErrorMessage {
			parts = append(parts, ev.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// ctxError is the Err of a call whose context ended: it wraps the context's error (so
// errors.Is(err, context.DeadlineExceeded) holds) and says what became of the HCS operation.
type ctxError struct {
	cause      error
	opID       uint64
	cancelled  error // the error of HcsCancelOperation, if it failed
	notStarted bool  // the context had ended before the call was made
	abandoned  bool  // a call without an operation, left to finish in the background
}

func (c *ctxError) Error() string {
	switch {
	case c.notStarted:
		return fmt.Sprintf("%v; not started", c.cause)
	case c.abandoned:
		return fmt.Sprintf("%v; call abandoned", c.cause)
	case c.cancelled != nil:
		return fmt.Sprintf("%v; cancelling HCS operation %d failed: %v", c.cause, c.opID, c.cancelled)
	}
	return fmt.Sprintf("%v; HCS operation %d cancelled", c.cause, c.opID)
}

func (c *ctxError) Unwrap() error { return c.cause }
