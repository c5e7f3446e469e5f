// Package wintest holds what the Windows tests of several packages need in common to run both
// on Windows and under Wine (make test-windows, hack/wine): telling Wine apart, go-winio pipe
// listeners with the one Wine work-around they need, and waiting until a terminated Wine process
// has really closed its sockets (WaitUnixExit), which Windows guarantees when Wait returns. It is imported by _windows_test.go files
// only; nothing in the product depends on it.
package wintest
