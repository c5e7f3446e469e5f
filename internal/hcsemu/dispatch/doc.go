// Package dispatch is what the emulator's services and its server agree on to serve a wire
// method: a Method decodes a request frame's args and answers, and Compose makes the server's
// table from each service's group of methods, explicitly, refusing a name served twice. It
// imports internal/hcsemu/wire only.
package dispatch
