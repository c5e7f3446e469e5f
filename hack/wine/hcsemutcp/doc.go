// Command hcsemutcp serves the hcsemu daemon's protocol on a loopback TCP address, for the
// stand-in computecore.dll that Windows test binaries load under Wine (hack/wine/computecore).
//
//	hcsemutcp --listen 127.0.0.1:9345 --hcsemu /run/hcsemu/hcsemu.sock [--address-file FILE]
//
// A Wine program cannot receive file descriptors over a unix socket, so this bridge dials
// hcsemu's unix socket once per TCP client and forwards frames both ways unchanged, except
// replies that carry descriptors (a process's stdio): it keeps the descriptors, sends the reply
// with "stdioToken" added and no descriptors, and relays each stream over the TCP connection
// the client opens for it with a first frame AttachStdio{token, slot}. The whole protocol is in
// hack/wine/README.md; it is what hcsemu itself would offer with a TCP listener, and this
// command can go away once it does.
//
// Linux only, like hcsemu.
package main
