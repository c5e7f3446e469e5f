package computenetwork

// zsyscall_windows.go is generated from the //sys lines of syscall_windows.go; as in
// internal/computecore, the directive lives in a file of every platform and mkwinsyscall is
// pinned to the golang.org/x/sys of go.mod.
//go:generate go run golang.org/x/sys/windows/mkwinsyscall@v0.49.0 -output zsyscall_windows.go syscall_windows.go
