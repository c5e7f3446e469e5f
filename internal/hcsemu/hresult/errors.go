package hresult

import (
	"errors"
	"fmt"

	"github.com/openhcs/runhcs/internal/computecore"
)

// Error is what every engine call fails with: the HRESULT HCS would return and a message that
// names the field, value, system or process at fault. It becomes the response's HRESULT and
// the ErrorMessage of its ResultError document.
type Error struct {
	HResult computecore.HRESULT
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Message, e.HResult) }

// Unwrap makes errors.Is(err, computecore.HCS_E_…) work.
func (e *Error) Unwrap() error { return e.HResult }

// Errorf is an *Error of hr with a formatted message.
func Errorf(hr computecore.HRESULT, format string, args ...any) *Error {
	return &Error{HResult: hr, Message: fmt.Sprintf(format, args...)}
}

// As turns any error into an *Error; one that is not already one becomes E_FAIL.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var hr computecore.HRESULT
	if errors.As(err, &hr) {
		return &Error{HResult: hr, Message: err.Error()}
	}
	return &Error{HResult: computecore.E_FAIL, Message: err.Error()}
}

// Win32 errors the emulated services fail with (the layer functions, a utility VM's
// devices), as HRESULT_FROM_WIN32 values.
const (
	ErrBusy         computecore.HRESULT = 0x800700AA // ERROR_BUSY
	ErrFileExists   computecore.HRESULT = 0x80070050 // ERROR_FILE_EXISTS
	ErrInvalidState computecore.HRESULT = 0x8007139F // ERROR_INVALID_STATE
	ErrNotFound     computecore.HRESULT = 0x80070490 // ERROR_NOT_FOUND
)
