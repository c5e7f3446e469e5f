// Package cgroup1 is one group of Linux cgroup v1 controllers, as the emulator uses them for
// the things Windows accounts and limits with a job object: hcsemu's compute systems
// (internal/hcsemu/compute) and the jobs of HostProcess containers in the Linux-native mode
// (internal/hostprocess). It creates and removes the group's folders, moves processes in,
// applies processor and memory limits in HCS's terms, freezes, kills and lists the group, and
// reads its accounting in HCS's units. It knows nothing of who names the groups or why.
//
// It imports nothing of the project.
package cgroup1
