//go:build linux

package main

import (
	"encoding/base64"
	"fmt"
	"os"
)

// kubeconfig is a kubeconfig file (client-go's clientcmd format, v1) with one cluster, one user
// and one context, its certificates inline so that a Windows client under Wine reads it without
// resolving Linux paths.
func kubeconfig(server string, caPEM []byte, user string, kp keyPair) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: runhcs
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: runhcs
  context:
    cluster: runhcs
    user: %s
current-context: runhcs
`, server, b64(caPEM), user, b64(kp.cert), b64(kp.key), user)
}

func writeKubeconfig(path, server string, caPEM []byte, user string, kp keyPair) error {
	return os.WriteFile(path, kubeconfig(server, caPEM, user, kp), 0o600)
}
