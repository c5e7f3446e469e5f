// Module cni pins the CNI plugin the Windows tests run under Wine against the emulator's HNS:
// win-bridge from containernetworking/plugins, built for windows/amd64 by hack/tools.sh. Its own
// module, because its dependency graph would move containerd's versions in tools/go.mod.
module github.com/openhcs/runhcs/tools/cni

go 1.26.6

tool (
	github.com/containernetworking/plugins/plugins/ipam/host-local
	github.com/containernetworking/plugins/plugins/main/windows/win-bridge
)

require (
	github.com/Microsoft/go-winio v0.6.2 // indirect
	github.com/Microsoft/hcsshim v0.13.0 // indirect
	github.com/alexflint/go-filemutex v1.3.0 // indirect
	github.com/buger/jsonparser v1.1.1 // indirect
	github.com/containerd/cgroups/v3 v3.0.3 // indirect
	github.com/containerd/errdefs v0.3.0 // indirect
	github.com/containerd/errdefs/pkg v0.3.0 // indirect
	github.com/containerd/typeurl/v2 v2.2.0 // indirect
	github.com/containernetworking/cni v1.3.0 // indirect
	github.com/containernetworking/plugins v1.9.1 // indirect
	github.com/coreos/go-iptables v0.8.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/groupcache v0.0.0-20210331224755-41bb18bfe9da // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/safchain/ethtool v0.6.2 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	go.opencensus.io v0.24.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20241015192408-796eee8c2d53 // indirect
	google.golang.org/grpc v1.69.0 // indirect
	google.golang.org/protobuf v1.36.7 // indirect
	sigs.k8s.io/knftables v0.0.18 // indirect
)
