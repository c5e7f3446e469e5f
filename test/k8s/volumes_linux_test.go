//go:build linux

package k8s

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// tokenAudience is the audience of the pod's own projected token (a second one beside the
// automatic API token).
const tokenAudience = "runhcs-test"

// TestVolumes gives one pod each kind of volume users give Windows pods, and each container
// reads one thing back with the workload's read, as kubelet.exe mounted it on the node:
//   - emptyDir: a file an init container wrote;
//   - configMap and secret: a key each;
//   - hostPath: a file the node has (and the init container leaves one there for the node);
//   - the projected service-account token (the automatic kube-api-access volume), which the
//     API server then accepts for the pod's ServiceAccount, its namespace file, and a token of
//     its own audience from a projected volume;
//   - subPath: one key of the configMap as a file, and a folder of the emptyDir.
//
// Process isolated and with the Hyper-V RuntimeClass (the volumes then reach the utility VM as
// VSMB shares).
func TestVolumes(t *testing.T) {
	cs := client(t)
	forEachIsolation(t, cs, func(t *testing.T, rc *string) {
		ns := namespace(t, cs)
		ctx := context.Background()
		hostWin, hostDir := nodeFolder(t, cs, ns)
		if err := os.WriteFile(filepath.Join(hostDir, "node.txt"), []byte("from the node"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "config"},
			Data:       map[string]string{"greeting": "hello from a configMap", "settings.json": `{"mode":"subPath"}`},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "secret"},
			Data:       map[string][]byte{"password": []byte("s3cret from a Secret")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		const sa = `C:\var\run\secrets\kubernetes.io\serviceaccount`
		read := func(name, path string, mounts ...corev1.VolumeMount) corev1.Container {
			c := workloadContainer(name, "read", path)
			c.VolumeMounts = mounts
			return c
		}
		cache := corev1.VolumeMount{Name: "cache", MountPath: `C:\cache`}
		want := map[string]string{
			"emptydir":       "written by init",
			"configmap":      "hello from a configMap",
			"secret":         "s3cret from a Secret",
			"hostpath":       "from the node",
			"sa-namespace":   ns,
			"subpath-file":   `{"mode":"subPath"}`,
			"subpath-folder": "in the sub folder",
		}
		init := workloadContainer("init", "write", `C:\cache\init.txt`, "written by init")
		init.VolumeMounts = []corev1.VolumeMount{cache}
		// A second init container: the workload writes one file per run.
		initSub := workloadContainer("init-sub", "write", `C:\cache\sub\in-sub.txt`, "in the sub folder")
		initSub.VolumeMounts = []corev1.VolumeMount{cache}
		initHost := workloadContainer("init-host", "write", `C:\host\from-pod.txt`, "from the pod")
		initHost.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: `C:\host`}}

		pod := windowsPod("volumes", corev1.RestartPolicyNever,
			read("emptydir", `C:\cache\init.txt`, cache),
			read("configmap", `C:\config\greeting`, corev1.VolumeMount{Name: "config", MountPath: `C:\config`}),
			read("secret", `C:\secret\password`, corev1.VolumeMount{Name: "secret", MountPath: `C:\secret`, ReadOnly: true}),
			read("hostpath", `C:\host\node.txt`, corev1.VolumeMount{Name: "host", MountPath: `C:\host`}),
			read("sa-token", sa+`\token`),
			read("sa-namespace", sa+`\namespace`),
			read("own-token", `C:\tokens\token`, corev1.VolumeMount{Name: "token", MountPath: `C:\tokens`}),
			read("subpath-file", `C:\app\settings.json`, corev1.VolumeMount{Name: "config", MountPath: `C:\app\settings.json`, SubPath: "settings.json"}),
			read("subpath-folder", `C:\sub\in-sub.txt`, corev1.VolumeMount{Name: "cache", MountPath: `C:\sub`, SubPath: "sub"}),
		)
		pod.Spec.InitContainers = []corev1.Container{init, initSub, initHost}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}}},
			{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "secret"}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: hostWin, Type: ptr(corev1.HostPathDirectory)}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: tokenAudience, ExpirationSeconds: ptr(int64(3600)), Path: "token"}}}}}},
		}
		pod.Spec.RuntimeClassName = rc
		createPod(t, cs, ns, pod)
		p := waitPod(t, cs, ns, pod.Name, podFinished)
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s/volumes: %s", ns, describe(p))
		}
		for name, w := range want {
			if got := podLogs(t, cs, ns, pod.Name, name); got != w {
				t.Errorf("container %s read %q, want %q", name, got, w)
			}
		}
		// The tokens are the pod's: the API server authenticates them as its ServiceAccount, bound
		// to this pod.
		checkToken(t, cs, ns, podLogs(t, cs, ns, pod.Name, "sa-token"), nil)
		checkToken(t, cs, ns, podLogs(t, cs, ns, pod.Name, "own-token"), []string{tokenAudience})
		// What the pod wrote to its hostPath folder is on the node.
		if b, err := os.ReadFile(filepath.Join(hostDir, "from-pod.txt")); err != nil || string(b) != "from the pod" {
			t.Errorf("the node's %s\\from-pod.txt: %q, %v; want %q", hostWin, b, err, "from the pod")
		}
	})
}

// checkToken asks the API server (TokenReview) whose token it is: the default ServiceAccount
// of ns, bound to the pod "volumes", for the audiences given (nil: the API server's own).
func checkToken(t *testing.T, cs *kubernetes.Clientset, ns, token string, audiences []string) {
	t.Helper()
	if strings.Count(token, ".") != 2 {
		t.Errorf("token %q is not a JWT", token)
		return
	}
	r, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := r.Status
	if !st.Authenticated || st.Error != "" {
		t.Errorf("TokenReview (audiences %v): not authenticated: %q", audiences, st.Error)
		return
	}
	if want := "system:serviceaccount:" + ns + ":default"; st.User.Username != want {
		t.Errorf("TokenReview: user %q, want %q", st.User.Username, want)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "volumes" {
		t.Errorf("TokenReview: bound to pod %v, want volumes", got)
	}
}
