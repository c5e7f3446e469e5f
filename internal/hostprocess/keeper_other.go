//go:build !linux

package hostprocess

// Reexec returns: only the Linux-native mode's jobs have a keeper process (keeper_linux.go);
// a Windows job object ends with its last handle by itself (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE).
func Reexec() {}
