package bootstrapsigner

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n"

func clusterInfo(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-public", Name: "cluster-info"}, Data: data}
}

func token(id string, usages ...string) bootstraptoken.Token {
	return bootstraptoken.Token{ID: id, Secret: "0123456789abcdef", Usages: usages}
}

func sig(t *testing.T, content string, tok bootstraptoken.Token) string {
	t.Helper()
	s, err := jws.ComputeDetachedSignature(content, tok.ID, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hasData waits until cluster-info's data are want.
func hasData(t *testing.T, cs *fake.Clientset, want map[string]string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(context.Background(), "cluster-info", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !maps.Equal(cm.Data, want) {
			return fmt.Sprintf("cluster-info data %q, want %q", cm.Data, want)
		}
		return ""
	})
}

func TestSignsClusterInfo(t *testing.T) {
	signing, other := token("aaaaaa", "signing", "authentication"), token("bbbbbb", "authentication")
	expired := token("cccccc", "signing")
	expired.Expires = time.Now().Add(-time.Minute)
	// A signature of a token that is gone, and another key, kept.
	cm := clusterInfo(map[string]string{"kubeconfig": kubeconfig, "jws-kubeconfig-zzzzzz": "stale", "other": "x"})
	cs := controllertest.NewClient(cm, signing.SecretObject(), other.SecretObject(), expired.SecretObject())
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	hasData(t, cs, map[string]string{"kubeconfig": kubeconfig, "other": "x", "jws-kubeconfig-aaaaaa": sig(t, kubeconfig, signing)})

	// A new signing token signs too; a changed kubeconfig is signed anew;
	// a deleted token's signature goes.
	ctx := context.Background()
	added := token("dddddd", "signing")
	if _, err := cs.CoreV1().Secrets("kube-system").Create(ctx, added.SecretObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hasData(t, cs, map[string]string{"kubeconfig": kubeconfig, "other": "x",
		"jws-kubeconfig-aaaaaa": sig(t, kubeconfig, signing), "jws-kubeconfig-dddddd": sig(t, kubeconfig, added)})
	changed := kubeconfig + "# changed\n"
	cur, _ := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	cur.Data["kubeconfig"] = changed
	if _, err := cs.CoreV1().ConfigMaps("kube-public").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Secrets("kube-system").Delete(ctx, "bootstrap-token-aaaaaa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	hasData(t, cs, map[string]string{"kubeconfig": changed, "other": "x", "jws-kubeconfig-dddddd": sig(t, changed, added)})
}
