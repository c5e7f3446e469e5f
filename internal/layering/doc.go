// Package layering holds no code: its test (TestImportRules) enforces who may import whom in
// runhcs, the layering of DESIGN.md's "Layout and who may import whom" and of the packages' own
// doc.go files, as `go list` sees the code for Linux and for Windows. A package's non-test files
// may import only the runhcs packages its entry in rules lists; leaves import nothing of runhcs
// (winargs, schema2, emuvhdx and hcsemu/layout not even outside the standard library); no
// internal/ package, test included, imports test/; no suite imports another suite; and only the
// emulator's own command, the runhcs clients chosen for Linux builds (internal/hcs, internal/hns)
// and the test harnesses reach into the emulator. A failure names the package and the offending
// import.
//
// A package not in rules (a new one) is held to the entry of its nearest listed parent folder,
// and may also import that parent's other subpackages; the test logs it, so that it gets an
// entry of its own.
package layering
