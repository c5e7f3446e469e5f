// Package client holds the clients of the hcsemu daemon for Linux builds. hns_unix.go is the
// computenetwork.API of the daemon's HNS (HNSClient); the HCS client (computecore.API) still
// lives in internal/computecore (emulator_unix.go) until it moves here.
//
// It imports internal/computenetwork (the API it implements) and internal/hcsemu/wire (the
// protocol); nothing above those.
package client
