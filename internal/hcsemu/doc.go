// Package hcsemu is an emulator of the Host Compute Service for Linux: the engine that keeps
// compute systems and processes with HCS's documents, states and errors, the server that
// serves it on a unix socket, and the client that implements computecore.API over it.
package hcsemu
