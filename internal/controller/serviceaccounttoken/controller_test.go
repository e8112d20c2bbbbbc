package serviceaccounttoken

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

const rootCA = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"

func start(t *testing.T, cs *fake.Clientset) *serviceaccount.Key {
	t.Helper()
	key, err := serviceaccount.LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		if c, err = New(d, key, []byte(rootCA)); err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	if !cache.WaitForCacheSync(t.Context().Done(), c.synced...) {
		t.Fatal("caches did not sync")
	}
	return key
}

func tokenSecret(name, sa string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}
}

// clientObjects is serviceaccount.Objects over the fake clientset.
type clientObjects struct{ cs *fake.Clientset }

func (o clientObjects) ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	return o.cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return o.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return o.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

func (o clientObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return o.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func gone(t *testing.T, cs *fake.Clientset, name string) {
	t.Helper()
	controllertest.Eventually(t, func() string {
		if _, err := cs.CoreV1().Secrets("ns").Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("Secret %s: %v, want it deleted", name, err)
		}
		return ""
	})
}

func TestTokenSecrets(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "build", UID: "sa-uid"},
		Secrets: []corev1.ObjectReference{{Name: "tok"}, {Name: "other"}}}
	wrongUID := tokenSecret("stale", "build")
	wrongUID.Annotations[corev1.ServiceAccountUIDKey] = "old-uid"
	opaque := tokenSecret("opaque", "build")
	opaque.Type = corev1.SecretTypeOpaque
	cs := controllertest.NewClient(sa, tokenSecret("tok", "build"), tokenSecret("orphan", "nobody"), wrongUID, opaque)
	key := start(t, cs)
	ctx := context.Background()

	var filled *corev1.Secret
	controllertest.Eventually(t, func() string {
		s, err := cs.CoreV1().Secrets("ns").Get(ctx, "tok", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(s.Data["token"]) == 0 {
			return "no token yet"
		}
		filled = s
		return ""
	})
	if string(filled.Data["ca.crt"]) != rootCA || string(filled.Data["namespace"]) != "ns" ||
		filled.Annotations[corev1.ServiceAccountUIDKey] != "sa-uid" || filled.Annotations[corev1.ServiceAccountNameKey] != "build" {
		t.Errorf("filled Secret = %+v", filled)
	}
	a := &serviceaccount.LegacyAuthenticator{Key: key, Objects: clientObjects{cs}}
	u, ok, err := a.AuthenticateToken(ctx, string(filled.Data["token"]))
	if err != nil || !ok || u.GetName() != "system:serviceaccount:ns:build" || u.GetUID() != "sa-uid" {
		t.Fatalf("token authenticates as %v, %v, %v", u, ok, err)
	}

	// A Secret of a ServiceAccount that does not exist, or of another
	// with its name, is deleted; other types are left alone.
	gone(t, cs, "orphan")
	gone(t, cs, "stale")
	if _, err := cs.CoreV1().Secrets("ns").Get(ctx, "opaque", metav1.GetOptions{}); err != nil {
		t.Errorf("opaque Secret: %v", err)
	}

	// A token is kept; a lost ca.crt comes back.
	filled.Data["ca.crt"] = nil
	if _, err := cs.CoreV1().Secrets("ns").Update(ctx, filled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		s, err := cs.CoreV1().Secrets("ns").Get(ctx, "tok", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if string(s.Data["ca.crt"]) != rootCA {
			return "ca.crt not restored"
		}
		if string(s.Data["token"]) != string(filled.Data["token"]) {
			return "token replaced"
		}
		return ""
	})

	// A deleted token Secret is dropped from its ServiceAccount.
	if err := cs.CoreV1().Secrets("ns").Delete(ctx, "tok", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		got, err := cs.CoreV1().ServiceAccounts("ns").Get(ctx, "build", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(got.Secrets) != 1 || got.Secrets[0].Name != "other" {
			return fmt.Sprintf("secrets %v, want [other]", got.Secrets)
		}
		return ""
	})

	// The ServiceAccount's deletion deletes its token Secrets.
	if _, err := cs.CoreV1().Secrets("ns").Create(ctx, tokenSecret("tok2", "build"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		s, err := cs.CoreV1().Secrets("ns").Get(ctx, "tok2", metav1.GetOptions{})
		if err != nil || len(s.Data["token"]) == 0 {
			return fmt.Sprintf("tok2 not filled: %v", err)
		}
		return ""
	})
	if err := cs.CoreV1().ServiceAccounts("ns").Delete(ctx, "build", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, cs, "tok2")
	time.Sleep(50 * time.Millisecond)
	if _, err := cs.CoreV1().Secrets("ns").Get(ctx, "opaque", metav1.GetOptions{}); err != nil {
		t.Errorf("opaque Secret: %v", err)
	}
}
