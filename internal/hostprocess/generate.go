package hostprocess

// zsyscall_windows.go is generated from the //sys lines of syscall_windows.go; the directive
// lives in a file of every platform, as in internal/computecore.
//go:generate go run golang.org/x/sys/windows/mkwinsyscall@v0.49.0 -output zsyscall_windows.go syscall_windows.go
