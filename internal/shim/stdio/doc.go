// Package stdio connects the stdio streams of a process in a compute system to what containerd
// asked for: FIFOs (Linux) or named pipes (Windows) that containerd's client reads and writes,
// a file (a file:// URI: file:///var/log/c1.log, or file:///C:/dir/c1.log on Windows), or a
// logging binary (binary:// URI, the protocol of containerd's runc shim: the binary gets stdout
// and stderr as fds 3 and 4 and signals readiness on fd 5).
//
// A Relay copies between the two sides and reports when the process's output has been drained,
// so the shim can publish a process's exit only after every byte it wrote has been delivered.
// It imports nothing of runhcs.
package stdio
