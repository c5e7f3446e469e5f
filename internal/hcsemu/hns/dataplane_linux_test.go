package hns

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/hns/hcn"
	"github.com/openhcs/runhcs/internal/testenv"
)

// TestPortMappingsFromHost checks, with real packets, what the emulated host's own programs
// reach of its port mappings, per network type and host build (hostReachOf has the sources),
// and that another endpoint reaches every mapping at the host's address whatever the host's own
// programs may: on a Windows Server 2022 host a NAT network's mapping answers at the host's
// address and at 127.0.0.1 (WinNAT, from 1809); an L2Bridge network's (VFP) answers the host at
// neither without the LocalRoutedVip flag, and at the host's address only with it; on a
// Windows Server 2016 host a NAT mapping answers the host at neither.
func TestPortMappingsFromHost(t *testing.T) {
	for _, tc := range []struct {
		name              string
		build             uint32
		netType           string
		flags             uint32
		address, loopback bool // whether the host reaches the mapping there
	}{
		{"NAT 2022", build2022, hcn.NAT, 0, true, true},
		{"L2Bridge 2022", build2022, hcn.L2Bridge, 0, false, false},
		{"L2Bridge LocalRoutedVip 2022", build2022, hcn.L2Bridge, natFlagsLocalRoutedVip, true, false},
		{"NAT 2016", 14393, hcn.NAT, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.RequireRoot(t, "network namespaces, nftables")
			ctx, root := context.Background(), t.TempDir()
			h, err := New(ctx, root, tc.build)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := h.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			b, _ := json.Marshal(hcn.HostComputeNetwork{Name: "ports", Type: tc.netType, Ipams: []hcn.Ipam{{Subnets: []hcn.Subnet{{
				IpAddressPrefix: "10.254.0.0/24", Routes: []hcn.Route{{NextHop: "10.254.0.1", DestinationPrefix: "0.0.0.0/0"}},
			}}}}})
			netID, err := h.CreateNetwork(ctx, "", string(b))
			if err != nil {
				t.Fatal(err)
			}
			// netnsWith makes an HNS namespace holding an endpoint at ip with policies and
			// returns its network namespace file.
			netnsWith := func(ip, policies string) string {
				t.Helper()
				epID, err := h.CreateEndpoint(ctx, netID, "", fmt.Sprintf(`{"IpConfigurations":[{"IpAddress":%q}],"Policies":[%s]}`, ip, policies))
				if err != nil {
					t.Fatal(err)
				}
				nsID, err := h.CreateNamespace(ctx, "", `{}`)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.ModifyNamespace(ctx, nsID, fmt.Sprintf(`{"ResourceType":"Endpoint","RequestType":"Add","Settings":{"EndpointId":%q}}`, epID)); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(root, "netns", nsID)
			}
			server := netnsWith("10.254.0.10", fmt.Sprintf(`{"Type":"PortMapping","Settings":{"Protocol":6,"InternalPort":7000,"ExternalPort":17000,"Flags":%d}}`, tc.flags))
			client := netnsWith("10.254.0.20", "")
			var ln net.Listener
			if err := InNetns(server, func() (err error) { ln, err = net.Listen("tcp", "0.0.0.0:7000"); return err }); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					fmt.Fprintf(c, "hello from the endpoint\n")
					c.Close()
				}
			}()
			// reaches says whether a connection from the network namespace file ns to addr
			// gets the server's line. Nothing listens at the host's own addresses, so a
			// connection no rule maps is refused at once.
			reaches := func(ns, addr string) bool {
				var line string
				err := InNetns(ns, func() error {
					c, err := net.DialTimeout("tcp", addr, 3*time.Second)
					if err != nil {
						return err
					}
					defer c.Close()
					c.SetDeadline(time.Now().Add(10 * time.Second))
					line, err = bufio.NewReader(c).ReadString('\n')
					return err
				})
				return err == nil && line == "hello from the endpoint\n"
			}
			host := HostNetnsPath(root)
			if !reaches(host, "10.254.0.10:7000") {
				t.Fatal("the host does not reach the endpoint at its own address")
			}
			if got := reaches(host, "10.254.0.1:17000"); got != tc.address {
				t.Errorf("the host at its address 10.254.0.1:17000 reaches the mapping: %v, want %v", got, tc.address)
			}
			if got := reaches(host, "127.0.0.1:17000"); got != tc.loopback {
				t.Errorf("the host at 127.0.0.1:17000 reaches the mapping: %v, want %v", got, tc.loopback)
			}
			if !reaches(client, "10.254.0.1:17000") {
				t.Error("another endpoint does not reach the mapping at the host's address 10.254.0.1:17000")
			}
		})
	}
}
