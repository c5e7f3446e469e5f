package wire

// MethodGetHostPerformance answers the emulated host's performance figures: what Windows'
// performance counters (PDH) report of a host, and what the stand-in pdh.dll (hack/wine/pdh)
// turns into the counters kubelet reads (k8s.io/kubernetes pkg/kubelet/winstats). It is an
// emulator contract, not a Windows call: on Windows PDH reads the kernel's counters. No args;
// the reply is a HostPerformance. Cumulative figures only: rates and percentages are the
// client's to compute between two samples, as PDH computes them between two collections.
const MethodGetHostPerformance = "GetHostPerformance"

// HostPerformance is the reply of MethodGetHostPerformance.
type HostPerformance struct {
	// TimestampNs is when the sample was taken, on the daemon's monotonic clock (nanoseconds
	// since an arbitrary start): only differences between two samples mean anything.
	TimestampNs int64 `json:"timestampNs"`
	// Processors is the emulated host's logical processor count (--host-processors).
	Processors int `json:"processors"`
	// MemoryTotalBytes is the emulated host's memory (--host-memory-mb).
	MemoryTotalBytes uint64 `json:"memoryTotalBytes"`
	// ProcessorBusyNs is the processor time the emulated host's processes have used in all:
	// the processes in its network namespace (the node's Windows programs) and those of its
	// compute systems (their cgroups).
	ProcessorBusyNs uint64 `json:"processorBusyNs"`
	// WorkingSetPrivateBytes is the private memory resident for those processes
	// (\Process(_Total)\Working Set - Private).
	WorkingSetPrivateBytes uint64 `json:"workingSetPrivateBytes"`
	// CommittedBytes is their committed private memory (\Memory\Committed Bytes): resident
	// and swapped out.
	CommittedBytes uint64 `json:"committedBytes"`
	// Adapters are the network interfaces of the emulated host's network namespace, loopback
	// excepted (\Network Adapter(*)).
	Adapters []HostAdapter `json:"adapters"`
}

// HostAdapter is one network interface's counters, cumulative since it was made.
type HostAdapter struct {
	Name                     string `json:"name"`
	BytesReceived            uint64 `json:"bytesReceived"`
	BytesSent                uint64 `json:"bytesSent"`
	PacketsReceived          uint64 `json:"packetsReceived"`
	PacketsSent              uint64 `json:"packetsSent"`
	PacketsReceivedDiscarded uint64 `json:"packetsReceivedDiscarded"`
	PacketsReceivedErrors    uint64 `json:"packetsReceivedErrors"`
	PacketsOutboundDiscarded uint64 `json:"packetsOutboundDiscarded"`
	PacketsOutboundErrors    uint64 `json:"packetsOutboundErrors"`
}
