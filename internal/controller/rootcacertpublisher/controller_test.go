package rootcacertpublisher

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

func start(t *testing.T, cs *fake.Clientset) *Controller {
	t.Helper()
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(d, []byte(testCA)); err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	if !cache.WaitForCacheSync(t.Context().Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return c
}

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

// published is the ConfigMap as the controller writes it.
func published(namespace string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ConfigMapName,
			Annotations: map[string]string{DescriptionAnnotation: Description}},
		Data: map[string]string{"ca.crt": testCA},
	}
}

func get(cs *fake.Clientset, namespace string) (*corev1.ConfigMap, error) {
	return cs.CoreV1().ConfigMaps(namespace).Get(context.Background(), ConfigMapName, metav1.GetOptions{})
}

// isPublished waits until namespace's kube-root-ca.crt holds the CA and
// the description, and returns it.
func isPublished(t *testing.T, cs *fake.Clientset, namespace string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	controllertest.Eventually(t, func() string {
		var err error
		switch cm, err = get(cs, namespace); {
		case err != nil:
			return fmt.Sprintf("ConfigMap %s/%s: %v", namespace, ConfigMapName, err)
		case !maps.Equal(cm.Data, map[string]string{"ca.crt": testCA}):
			return fmt.Sprintf("ConfigMap %s/%s data %q", namespace, ConfigMapName, cm.Data)
		case cm.Annotations[DescriptionAnnotation] == "":
			return fmt.Sprintf("ConfigMap %s/%s annotations %q", namespace, ConfigMapName, cm.Annotations)
		}
		return ""
	})
	return cm
}

// writes are the create, update, patch and delete actions cs saw.
func writes(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			out = append(out, fmt.Sprintf("%s %s %s", a.GetVerb(), a.GetResource().Resource, a.GetNamespace()))
		}
	}
	return out
}

func TestNamespacesGetConfigMap(t *testing.T) {
	cs := controllertest.NewClient(namespace("kube-system", corev1.NamespaceActive))
	start(t, cs)
	cm := isPublished(t, cs, "kube-system")
	if got := cm.Annotations[DescriptionAnnotation]; got != Description {
		t.Errorf("description %q, want upstream's %q", got, Description)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), namespace("shop", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	isPublished(t, cs, "shop")
}

func TestDeletedIsRecreated(t *testing.T) {
	cs := controllertest.NewClient(namespace("shop", corev1.NamespaceActive), published("shop"))
	start(t, cs)
	if err := cs.CoreV1().ConfigMaps("shop").Delete(context.Background(), ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	isPublished(t, cs, "shop")
}

func TestChangesAreRestored(t *testing.T) {
	cs := controllertest.NewClient(namespace("shop", corev1.NamespaceActive), published("shop"))
	start(t, cs)

	// ca.crt changed, a key added, the description removed; a label and
	// another annotation added, which stay.
	cm := published("shop")
	cm.Data = map[string]string{"ca.crt": "tampered", "extra": "x"}
	cm.Annotations = map[string]string{"note": "mine"}
	cm.Labels = map[string]string{"team": "a"}
	if _, err := cs.CoreV1().ConfigMaps("shop").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm = isPublished(t, cs, "shop")
	if !maps.Equal(cm.Annotations, map[string]string{DescriptionAnnotation: Description, "note": "mine"}) || cm.Labels["team"] != "a" {
		t.Errorf("metadata %v %v, want the description back and the rest kept", cm.Annotations, cm.Labels)
	}

	// ca.crt removed.
	cm = published("shop")
	cm.Data = nil
	if _, err := cs.CoreV1().ConfigMaps("shop").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	isPublished(t, cs, "shop")
}

func TestOtherConfigMapsUntouched(t *testing.T) {
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "settings"}, Data: map[string]string{"ca.crt": "mine"}}
	cs := controllertest.NewClient(namespace("shop", corev1.NamespaceActive), published("shop"), other)
	start(t, cs)
	other = other.DeepCopy()
	other.Data["ca.crt"] = "still mine"
	if _, err := cs.CoreV1().ConfigMaps("shop").Update(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := writes(cs); len(got) != 1 {
		t.Errorf("writes %q, want only the test's", got)
	}
}

func TestTerminatingNamespaceSkipped(t *testing.T) {
	tampered := published("going")
	tampered.Data["ca.crt"] = "tampered"
	cs := controllertest.NewClient(namespace("going", corev1.NamespaceTerminating), namespace("empty", corev1.NamespaceTerminating),
		tampered, namespace("shop", corev1.NamespaceActive))
	c := start(t, cs)
	isPublished(t, cs, "shop")
	for _, n := range []string{"going", "empty"} {
		if err := c.sync(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := get(cs, "empty"); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap in a terminating namespace: %v, want none", err)
	}
	// The namespace controller deletes it: it is not made anew.
	if err := cs.CoreV1().ConfigMaps("going").Delete(context.Background(), ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := writes(cs); len(got) != 2 {
		t.Errorf("writes %q, want the create in shop and the test's delete", got)
	}
}

func TestNoWriteWhenInPlace(t *testing.T) {
	// A description of the user's own is kept, as upstream.
	own := published("kube-system")
	own.Annotations[DescriptionAnnotation] = "ours"
	cs := controllertest.NewClient(namespace("kube-system", corev1.NamespaceActive), own,
		namespace("shop", corev1.NamespaceActive), published("shop"))
	c := start(t, cs)
	ns := namespace("shop", corev1.NamespaceActive)
	ns.Labels = map[string]string{"team": "a"}
	if _, err := cs.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"kube-system", "shop", "gone"} {
		if err := c.sync(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if got := writes(cs); len(got) != 1 {
		t.Errorf("writes %q, want only the test's namespace update", got)
	}
}

func TestRootCA(t *testing.T) {
	certPEM, _, err := certutil.GenerateSelfSignedCertKey("svcnet-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	withData := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("from kubeconfig"), CAFile: bad}}
	for _, tc := range []struct {
		name, file string
		cfg        *rest.Config
		want, err  string
	}{
		{name: "root-ca-file wins", file: caFile, cfg: withData, want: string(certPEM)},
		{name: "root-ca-file must hold certificates", file: bad, cfg: withData, err: "error parsing root-ca-file at " + bad},
		{name: "missing root-ca-file", file: filepath.Join(dir, "none"), err: "error parsing root-ca-file"},
		{name: "client CA data", cfg: withData, want: "from kubeconfig"},
		{name: "client CA file", cfg: &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}, want: string(certPEM)},
		{name: "no CA", cfg: &rest.Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RootCA(tc.file, tc.cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("RootCA = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
