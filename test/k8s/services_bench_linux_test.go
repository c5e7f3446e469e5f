//go:build linux

package k8s

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeProxyMetrics is kube-proxy's metrics address in the node's host (its default,
// metricsBindAddress 127.0.0.1:10249).
const kubeProxyMetrics = "127.0.0.1:10249"

// syncDurations reads kube-proxy's sync histogram of its IPv4 proxier
// (kubeproxy_sync_proxy_rules_duration_seconds{ip_family="IPv4"}: how long each sync of the
// Services into HNS took): the sum of the durations and the count.
func syncDurations(b testing.TB) (sum float64, count int) {
	b.Helper()
	c, err := fromNodeHost(b)("tcp", kubeProxyMetrics)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", kubeProxyMetrics)
	sc := bufio.NewScanner(c)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case `kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`:
			sum, _ = strconv.ParseFloat(val, 64)
		case `kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}`:
			count, _ = strconv.Atoi(val)
		}
	}
	return sum, count
}

// BenchmarkServices measures the Services of the Windows node (make bench on a cluster:
// hack/cluster.sh bench):
//   - sync-100x3: 100 ClusterIP Services of 3 backends each created at once; the time until the
//     last of them answers from the node's host, and kube-proxy's own sync durations meanwhile;
//   - connect: 200 HTTP requests from the node's host to a ClusterIP and to its one backend's
//     pod address directly, each on a new connection; p50 and p90 of each, and their ratio.
//
// Run it with -test.benchtime 1x: each iteration is a full measurement.
func BenchmarkServices(b *testing.B) {
	cs := client(b)
	ctx := context.Background()
	b.Run("sync-100x3", func(b *testing.B) {
		for range b.N {
			ns := namespace(b, cs)
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, namedWeb("web", 3), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			waitRollout(b, cs, ns, "web")
			sum0, count0 := syncDurations(b)
			host := fromNodeHost(b)
			load := loadAverage()
			start := time.Now()
			var addrs []string
			for i := range 100 {
				s := service(b, cs, ns, fmt.Sprintf("web-%03d", i), "web", corev1.ServiceTypeClusterIP, false)
				addrs = append(addrs, net.JoinHostPort(s.Spec.ClusterIP, fmt.Sprint(servicePort)))
			}
			created := time.Since(start)
			for _, a := range addrs {
				waitServing(b, "ClusterIP "+a, host, a)
			}
			all := time.Since(start)
			sum1, count1 := syncDurations(b)
			syncs := count1 - count0
			mean := 0.0
			if syncs > 0 {
				mean = (sum1 - sum0) / float64(syncs)
			}
			b.ReportMetric(all.Seconds(), "all-answer-s")
			b.ReportMetric(mean, "sync-mean-s")
			fmt.Printf("services 100x3: created in %.2fs, all 100 answering after %.2fs; kube-proxy ran %d syncs meanwhile, %.2fs in all, mean %.2fs; load average before %s, after %s\n",
				created.Seconds(), all.Seconds(), syncs, sum1-sum0, mean, load, loadAverage())
			deleteNamespaceAndWait(b, cs, ns)
		}
	})
	b.Run("connect", func(b *testing.B) {
		for range b.N {
			ns := namespace(b, cs)
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, namedWeb("web", 1), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			s := service(b, cs, ns, "web", "web", corev1.ServiceTypeClusterIP, false)
			waitRollout(b, cs, ns, "web")
			host := fromNodeHost(b)
			vip := net.JoinHostPort(s.Spec.ClusterIP, fmt.Sprint(servicePort))
			pod := net.JoinHostPort(podIPs(b, cs, ns, "web")[0], fmt.Sprint(webPort))
			waitServing(b, "ClusterIP", host, vip)
			measure := func(addr string) []time.Duration {
				var d []time.Duration
				for range 200 {
					t0 := time.Now()
					if _, err := httpGet(host, addr); err != nil {
						b.Fatal(err)
					}
					d = append(d, time.Since(t0))
				}
				slices.Sort(d)
				return d
			}
			direct, service := measure(pod), measure(vip)
			ratio := float64(percentile(service, 50)) / float64(percentile(direct, 50))
			b.ReportMetric(ratio, "p50-ratio")
			fmt.Printf("connect+GET from the node's host, 200 each: pod address p50 %v p90 %v; ClusterIP p50 %v p90 %v; ClusterIP/pod p50 %.2f; load average %s\n",
				percentile(direct, 50), percentile(direct, 90), percentile(service, 50), percentile(service, 90), ratio, loadAverage())
			deleteNamespaceAndWait(b, cs, ns)
		}
	})
}
