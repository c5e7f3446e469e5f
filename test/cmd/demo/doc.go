// Command demo is what hack/demo.sh (the README's first command) runs once everything is built:
// it starts hcsemu, the wcow snapshotter and a private containerd under a temporary root (package
// harness), imports the Windows-format test image, runs it with `ctr run` and prints what the
// container printed, then tears everything down, also on Ctrl-C or SIGTERM. Linux only.
//
//	demo [-containerd 2|1.7] [-show-logs] [-- COMMAND ARGS…]
package main
