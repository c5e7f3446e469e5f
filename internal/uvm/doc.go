// Package uvm owns utility VMs for Hyper-V isolated pods: their HCS document, VSMB shares,
// SCSI disks, NICs and processor and memory budgets.
package uvm
