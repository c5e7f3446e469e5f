//go:build linux

package k8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// gmsaSpec is a gMSA credential spec as `New-CredentialSpec` writes it (test/cri's, the same
// domain and account), given inline in the pod.
const gmsaSpec = `{"CmsPlugins":["ActiveDirectory"],"DomainJoinConfig":{"Sid":"S-1-5-21-702590844-1001920913-2680819671","MachineAccountName":"webapp01","Guid":"56d9b66c-d746-4f87-bd26-26760cfdca2e","DnsTreeName":"contoso.com","DnsName":"contoso.com","NetBiosName":"CONTOSO"},"ActiveDirectoryConfig":{"GroupManagedServiceAccounts":[{"Name":"webapp01","Scope":"contoso.com"},{"Name":"webapp01","Scope":"CONTOSO"}]}}`

// TestIdentity runs the workload's whoami under securityContext.windowsOptions: the pod's
// runAsUserName applies to its containers, a container's own overrides it, and a gMSA
// credential spec given inline (gmsaCredentialSpec) makes the container authenticate on the
// network as the domain's account (hcsemu shows it to the workload, internal/hcsemu/compute
// NetworkIdentityVariable) while it runs as ContainerAdministrator. Process isolated and with
// the Hyper-V RuntimeClass.
func TestIdentity(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)
		podUser := workloadContainer("pod-user", "whoami")
		ownUser := workloadContainer("own-user", "whoami")
		ownUser.SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
			RunAsUserName: ptr("ContainerAdministrator")}}
		gmsa := workloadContainer("gmsa", "whoami")
		gmsa.SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
			GMSACredentialSpecName: ptr("webapp01"), GMSACredentialSpec: ptr(gmsaSpec),
			RunAsUserName: ptr("ContainerAdministrator")}}
		pod := windowsPod("identity", corev1.RestartPolicyNever, podUser, ownUser, gmsa)
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
			RunAsUserName: ptr("ContainerUser")}}
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)
		p := waitPod(t, cs, ns, pod.Name, podFinished)
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s/identity: %s", ns, describe(p))
		}
		for c, want := range map[string]string{
			"pod-user": "user=User Manager\\ContainerUser\n",
			"own-user": "user=User Manager\\ContainerAdministrator\n",
			"gmsa":     "user=User Manager\\ContainerAdministrator\nnetwork=CONTOSO\\webapp01$\n",
		} {
			// The workload is a Linux program in the emulator: whoami adds its uid and gid.
			got := podLogs(t, cs, ns, pod.Name, c)
			if len(got) < len(want) || got[:len(want)] != want {
				t.Errorf("container %s: whoami %q, want %q first", c, got, want)
			}
		}
	})
}
