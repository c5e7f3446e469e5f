// Command workload is the program the test images run. It is one small static binary, built for
// Linux (hcsemu runs it chrooted in a container's volume) and for Windows (for real hosts), whose
// subcommands each do one thing a test asserts on:
//
//	echo ARGS…            print ARGS joined by spaces to stdout
//	stderr ARGS…          the same to stderr
//	args ARGS…            print each argument quoted, one per line (command-line parsing tests)
//	exit N                exit with code N
//	sleep SECONDS         sleep, then exit 0
//	cat                   copy stdin to stdout until EOF
//	env [NAME…]           print NAME=VALUE for every named variable (all, sorted, without names)
//	pwd                   print the working directory
//	write PATH TEXT       write TEXT to PATH (creating its folders)
//	read PATH             print the contents of PATH
//	tty [size]            print "tty" if stdout is a terminal (a console on Windows), else "notty";
//	                      with "size", then wait for a line on stdin (so a test can resize the
//	                      console in between) and print "size ROWS COLS" (Linux and Windows)
//	tty watch             print "tty" or "notty"; on a terminal then "size ROWS COLS" now and at
//	                      each change of the console size, until a line "exit" or the end of stdin
//	wait-signal EXITCODE  print "waiting", wait for SIGINT/SIGTERM (on Windows a console control
//	                      event, which Go delivers as the same two), print "got SIGINT" or
//	                      "got SIGTERM" and exit with EXITCODE
//	ignore-signals        print "ignoring", then catch and drop SIGINT/SIGTERM (console control
//	                      events) until killed
//	alloc MB [SECONDS]    allocate and touch MB MiB, print "allocated MB MiB", hold it SECONDS
//	spin SECONDS          keep one CPU busy for SECONDS
//	tick SECONDS [COUNT]  print "tick N" (N from 1) every SECONDS, COUNT times (default: until killed)
//	whoami                print "user=USERDOMAIN\USERNAME", "network=ACCOUNT" in a gMSA container of
//	                      hcsemu, and, except on Windows, "uid=N gid=M"
//	ps                    print the processes it can see, "PID NAME" a line, sorted by PID (Linux:
//	                      from /proc, C:\proc in hcsemu's containers: the container's own processes;
//	                      elsewhere an error)
//	listen ADDRESS        TCP echo server: listen on ADDRESS (host:port), print "listening ADDRESS"
//	                      (the address bound), then for each connection read one line and answer
//	                      "echo: LINE", until killed
//	http ADDRESS TEXT     HTTP server: listen on ADDRESS, print "listening ADDRESS", answer every
//	                      request with 200 and TEXT, until killed
//	udp ADDRESS TEXT      UDP server: listen on ADDRESS, print "listening ADDRESS", answer every
//	                      datagram with TEXT and a newline, until killed
//	connect ADDRESS MSG   connect to ADDRESS (retrying for up to 10 s while it is refused or
//	                      unreachable), send MSG and a newline, print the one-line answer
//	get URL [COUNT]       GET the http://HOST:PORT/PATH URL COUNT times (default 1), each on a new
//	                      connection, and print each answer's body on a line ("error: …" for a
//	                      failed request; then exit 1 at the end)
//	resolve NAME          look NAME up with the system's resolver and print its IPv4 addresses,
//	                      one a line, sorted (under hcsemu the container's C:\etc\resolv.conf)
//	pipe PIPE MSG         open the named pipe PIPE (\\.\pipe\NAME), send MSG and a newline, print
//	                      the one-line answer; the Linux build opens hcsemu's stand-in for the
//	                      pipe, the unix socket /pipe/name (the name lower-cased: pipe names are
//	                      case-insensitive; internal/hcsemu/compute pipes_linux.go)
//
// PATH arguments may be Windows paths ("C:\data\x.txt"): the Linux build maps the drive letter to
// its root and backslashes to slashes, since hcsemu runs it chrooted with C:\ as its root.
//
// Usage errors exit with code 2 and say what was wrong on stderr.
//
// Stand-ins for Windows tools. Started under one of these names (the base name of argv[0],
// without regard to case, with or without ".exe"), the binary is that tool instead, for the
// subset Kubernetes' Windows tests run as workloads; the test images install it at the tools'
// Windows paths (test/image ToolPaths). They are Linux programs, not Windows: they parse like
// the real tools, print what they print (CRLF line ends) and exit with their codes, and refuse
// anything else with "TOOL (runhcs stand-in): … is not supported by this stand-in" and exit
// code 1.
//
//	cmd         /C with /Q, /D, /S; echo, exit [/B] N, type, dir [/B], set, mkdir/md, rem and other
//	            programs through PATH/PATHEXT; %NAME%, &, &&, ||, quotes, ^, >, >>, 2>, 2>&1
//	powershell  [-NoProfile] [-NonInteractive] [-ExecutionPolicy P] -Command TEXT: statements
//	            split by ; and new lines, echo/Write-Output, Write-Host, Start-Sleep -s N / -m N,
//	            ls/dir/Get-ChildItem, cat/Get-Content, Get-Process (Windows PowerShell's table,
//	            from /proc: Linux's nearest figures), exit N, while ($true) {…}
//	            with break, $env:NAME (read and assigned), $LASTEXITCODE, quoted strings, programs
//	ping        [-t] [-n N] [-w MS] [-4] HOST: ICMP echo over IPv4, ping's lines and statistics
//	ipconfig    [/all]: the interfaces' addresses, masks, physical addresses and the host name;
//	            DNS as hcsemu's C:\etc\resolv.conf records it: the suffix search list, each
//	            adapter's connection-specific suffix and (with /all) its DNS servers
//	hostname    the computer name
//
// Nothing here imports the rest of runhcs but internal/winargs, a standard-library-only leaf
// (Windows command-line splitting and quoting): the binary must run inside a container with
// nothing else.
package main
