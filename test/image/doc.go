// Package image writes Windows-format OCI images for the tests: image tarballs in the OCI image
// layout (oci-layout, index.json, blobs/sha256/…) that `ctr image import` of containerd 2.x and
// 1.7 accepts and names after the io.containerd.image.name annotation.
//
// An image's config says os "windows", an os.version and an architecture; its layers are tars in
// the Windows layer format: every path under Files/ (the file tree, C:\), Hives/ (registry hive
// deltas) or UtilityVM/, with the Windows metadata a real layer carries in PAX records
// (MSWINDOWS.fileattr, MSWINDOWS.rawsd, LIBARCHIVE.creationtime), as Microsoft's layer export
// (hcsshim pkg/ociwclayer, go-winio backuptar) writes them. Deletions in upper layers are OCI
// whiteouts (".wh.<name>").
//
// Default returns the standard test image: a base layer with the workload program (test/workload)
// at Files/workload/workload.exe and Files/Windows/System32/workload.exe, the same binary at the
// Windows paths of the tools it stands in for (ToolPaths: cmd.exe, powershell.exe, PING.EXE,
// ipconfig.exe, HOSTNAME.EXE), PATH (DefaultPath) and a default
// command that prints "hello from a windows container". The package imports nothing else of
// runhcs but the leaf internal/emuvhdx (the emulated VHDX format of SystemTemplate.vhdx), so any
// test or tool can use it.
package image
