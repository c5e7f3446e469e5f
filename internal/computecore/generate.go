package computecore

// zsyscall_windows.go is generated from the //sys lines of syscall_windows.go. This directive
// lives in a file built on every platform (a _windows.go file is invisible to `go generate` on
// Linux, and GOOS=windows would make `go run` build a Windows mkwinsyscall). The version is
// pinned to the golang.org/x/sys in go.mod.
//go:generate go run golang.org/x/sys/windows/mkwinsyscall@v0.49.0 -output zsyscall_windows.go syscall_windows.go
