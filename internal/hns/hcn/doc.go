// Package hcn holds the Host Compute Network JSON documents: the v2 schema
// (HostComputeNetwork, HostComputeEndpoint, HostComputeNamespace, HostComputeQuery and the
// modify requests) and the v1 HNS documents that HNSCall carries. Field names and JSON tags
// are exactly those hcsshim's hcn and hns packages marshal (github.com/Microsoft/hcsshim,
// hcn/*.go and internal/hns/*.go), which is what the real service reads and writes.
//
// It is a leaf package: the emulator (internal/hcsemu) and the typed client (internal/hns)
// both import it.
package hcn
