// Package hns is the emulator's Host Network Service: networks, endpoints and namespaces kept
// with the HCN v2 documents (objects.go), kube-proxy's load balancers (loadbalancer.go), the v1
// HNSCall surface translated onto them (v1.go),
// endpoints' DNS settings (dns.go), endpoints as utility VMs' NICs (vmnic.go), and the Linux
// dataplane that makes them real in the emulated host's network namespace (dataplane_linux.go).
// A Service serves its wire methods (Methods) and the few calls compute systems make of it:
// joining a namespace, a container's own namespace, VM NICs, DNS. It imports internal/hns/hcn
// (the documents), computenetwork and computecore (HRESULTs) and the emulator's leaves
// (hresult, dispatch, wire, layout); never the compute side. docs/emulator.md has the contract.
package hns
