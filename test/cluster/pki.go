//go:build linux

package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLifetime is long enough for any test run and short enough not to matter if a key leaks:
// everything here lives in a temporary folder.
const certLifetime = 7 * 24 * time.Hour

// ca is a certificate authority: its certificate and key.
type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  []byte
}

// certSpec is a certificate to issue: a subject and, for a serving certificate, the names and
// addresses it serves as.
type certSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
	client bool
}

// keyPair is an issued certificate and its key, both PEM.
type keyPair struct {
	cert, key []byte
}

func newKey() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) }

func keyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// newCA makes a self-signed CA named cn.
func newCA(cn string, now time.Time) (*ca, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue makes a key and a certificate for s signed by the CA.
func (c *ca) issue(s certSpec, now time.Time) (keyPair, error) {
	if s.cn == "" || (!s.server && !s.client) {
		return keyPair{}, fmt.Errorf("certificate %q: a common name and a use (server, client) are required", s.cn)
	}
	key, err := newKey()
	if err != nil {
		return keyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames: s.dns, IPAddresses: s.ips, BasicConstraintsValid: true,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return keyPair{}, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: kp}, nil
}

// write stores the pair as DIR/NAME.crt and DIR/NAME.key (the key readable by root only).
func (k keyPair) write(dir, name string) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), k.cert, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), k.key, 0o600)
}

// serviceAccountKey makes the RSA key pair that signs and verifies service-account tokens
// (kube-apiserver's --service-account-signing-key-file and --service-account-key-file, the
// controller manager's --service-account-private-key-file): RS256, what the API server's
// issuer uses for RSA keys.
func serviceAccountKey() (priv, pub []byte, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	priv = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return priv, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// loadCA reads a CA written by writeCA (PREFIX.crt, PREFIX.key).
func loadCA(prefix string) (*ca, error) {
	certPEM, err := os.ReadFile(prefix + ".crt")
	if err != nil {
		return nil, err
	}
	keyPEMBytes, err := os.ReadFile(prefix + ".key")
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEMBytes)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s.crt/.key: no PEM block", prefix)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s.crt: %w", prefix, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s.key: %w", prefix, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s.key: not a signing key", prefix)
	}
	return &ca{cert: cert, key: signer, pem: certPEM}, nil
}
