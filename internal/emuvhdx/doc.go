// Package emuvhdx is the emulated VHDX format: what stands for a virtual disk file
// (sandbox.vhdx, SystemTemplate.vhdx) under the emulator, a small JSON header naming the folder
// that holds the disk's file system.
//
// More than the emulator writes it, so it is a neutral leaf rather than part of the emulator:
// the Linux snapshotter (internal/snapshot) makes the scratch disks of its snapshots in it, as
// containerd's Windows snapshotter makes sandbox.vhdx, and the test images (test/image) carry a
// SystemTemplate.vhdx in it. The emulator (internal/hcsemu) attaches such a disk (the storage
// filter, a utility VM's SCSI controller) and mounts its file system. It imports the standard
// library only.
package emuvhdx
