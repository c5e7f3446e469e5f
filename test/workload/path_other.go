//go:build !windows

package main

// windowsPaths: this build maps Windows paths onto its root (see hostPath).
const windowsPaths = false
