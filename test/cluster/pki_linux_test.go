//go:build linux

package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIssue checks that what the cluster's CA issues verifies for the use it was made for, and
// only for it, and survives writeCA/loadCA (join signs the kubelet's certificates with the CA
// serve wrote).
func TestIssue(t *testing.T) {
	now := time.Now()
	c, err := newCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeCA(dir, "ca", c); err != nil {
		t.Fatal(err)
	}
	c, err = loadCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pem)
	serving, err := c.issue(certSpec{cn: "kube-apiserver", dns: []string{"kubernetes.default.svc"}, ips: []net.IP{net.ParseIP(apiAddr)}, server: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.issue(certSpec{cn: "system:node:winnode-1", orgs: []string{"system:nodes"}, client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(kp keyPair) *x509.Certificate {
		t.Helper()
		if _, err := tls.X509KeyPair(kp.cert, kp.key); err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(kp.cert)
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	s := parse(serving)
	for _, name := range []string{"kubernetes.default.svc", apiAddr} {
		if _, err := s.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := s.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other"}); err == nil {
		t.Error("serving certificate verifies for a name it does not carry")
	}
	if _, err := s.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("serving certificate verifies as a client's")
	}
	cl := parse(client)
	if _, err := cl.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	// The API server's x509 authenticator takes the user from CN and the groups from O.
	if cl.Subject.CommonName != "system:node:winnode-1" || len(cl.Subject.Organization) != 1 || cl.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client subject %v", cl.Subject)
	}
	other, _ := newCA("other-ca", now)
	op := x509.NewCertPool()
	op.AppendCertsFromPEM(other.pem)
	if _, err := cl.Verify(x509.VerifyOptions{Roots: op, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("client certificate verifies against another CA")
	}
	if _, err := c.issue(certSpec{cn: "no-use"}, now); err == nil || !strings.Contains(err.Error(), "no-use") {
		t.Errorf("a certificate with no use: %v, want an error naming it", err)
	}
}

// TestKubeconfig checks the kubeconfig carries the server and its credentials inline.
func TestKubeconfig(t *testing.T) {
	now := time.Now()
	c, _ := newCA("ca", now)
	kp, err := c.issue(certSpec{cn: "kubernetes-admin", client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(p, "https://10.251.0.1:6443", c.pem, "kubernetes-admin", kp); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	for _, want := range []string{"server: https://10.251.0.1:6443", "certificate-authority-data: ", "client-certificate-data: ", "client-key-data: ", "current-context: runhcs"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, b)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("kubeconfig mode %v, want 0600 (it holds a key)", fi.Mode().Perm())
	}
}

// TestAncestors checks down spares its callers: this test's process and its parent.
func TestAncestors(t *testing.T) {
	a := ancestors()
	if !a[os.Getpid()] || !a[os.Getppid()] {
		t.Errorf("ancestors %v lack this process %d or its parent %d", a, os.Getpid(), os.Getppid())
	}
}

// TestNodeAddr checks node addresses and the refusal of a bad number.
func TestNodeAddr(t *testing.T) {
	if a, err := nodeAddr(1); err != nil || a.String() != "10.251.0.11" {
		t.Errorf("nodeAddr(1) = %v, %v", a, err)
	}
	if _, err := nodeAddr(0); err == nil || !strings.Contains(err.Error(), "0") {
		t.Errorf("nodeAddr(0): %v, want an error naming it", err)
	}
}
