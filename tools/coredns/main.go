// Command coredns is CoreDNS (the pinned github.com/coredns/coredns) with the plugins the
// cluster's DNS uses and no others, compiled in the way CoreDNS documents for a custom build
// (a main that imports coremain and the wanted plugins; the full build's plugin list,
// core/plugin/zplugin.go, pulls in every cloud provider's SDK). The cluster runs it as its
// cluster DNS, serving cluster.local from the API (hack/cluster.sh, docs/cluster.md).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
