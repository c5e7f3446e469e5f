package hostprocess

// CPURate is a job's CPU rate (1/10000ths of all the host's processors) for count of its
// hostProcessors, at least 1, as hcsshim converts a processor count
// (jobcontainers/oci.go: calculateJobCPURate).
func CPURate(count, hostProcessors uint32) uint32 {
	if hostProcessors == 0 || count >= hostProcessors {
		return 10000
	}
	if r := count * 10000 / hostProcessors; r > 0 {
		return r
	}
	return 1
}

// CPUWeight is a job's CPU weight (1..9) for a processor weight of 1..10000, as hcsshim
// converts it (jobcontainers/oci.go: calculateJobCPUWeight); 0 stays 0.
func CPUWeight(w uint32) uint32 {
	if w == 0 {
		return 0
	}
	return 1 + 8*w/10000
}
