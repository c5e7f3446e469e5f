// Command mkimage writes the standard Windows-format test image (package test/image) as an OCI
// image tarball for `ctr image import`:
//
//	mkimage -o test.tar [-workload PATH] [-name REF] [-os-version V] [-uncompressed]
//
// Without -workload it builds test/workload for linux/amd64 (what hcsemu runs); pass a Windows
// build of it for a real Windows host.
package main
