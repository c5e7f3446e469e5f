// Package protocols holds the .proto sources of runhcs' wire types and their generated Go
// code, in one sub-package each: runtime options, statistics and the diag service.
package protocols
