package tokencleaner

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func tokenSecret(id string, expires time.Time) *corev1.Secret {
	return bootstraptoken.Token{ID: id, Secret: "0123456789abcdef", Expires: expires, Usages: bootstraptoken.DefaultUsages}.SecretObject()
}

func exists(cs *fake.Clientset, ns, name string) bool {
	_, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	return !apierrors.IsNotFound(err)
}

func TestDeletesExpiredTokens(t *testing.T) {
	now := time.Now()
	expired := tokenSecret("aaaaaa", now.Add(-time.Minute))
	soon := tokenSecret("bbbbbb", now.Add(300*time.Millisecond))
	forever := tokenSecret("cccccc", time.Time{})
	unreadable := tokenSecret("dddddd", time.Time{})
	unreadable.Data["expiration"] = []byte("someday")
	// Not bootstrap tokens, or not in kube-system: left alone.
	opaque := tokenSecret("eeeeee", now.Add(-time.Minute))
	opaque.Type = corev1.SecretTypeOpaque
	elsewhere := tokenSecret("ffffff", now.Add(-time.Minute))
	elsewhere.Namespace = "default"
	cs := controllertest.NewClient(expired, soon, forever, unreadable, opaque, elsewhere)
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return []func(context.Context){c.Run}
	})
	controllertest.Eventually(t, func() string {
		for _, s := range []*corev1.Secret{expired, unreadable, soon} {
			if exists(cs, s.Namespace, s.Name) {
				return s.Name + " not deleted"
			}
		}
		return ""
	})
	for _, s := range []*corev1.Secret{forever, opaque, elsewhere} {
		if !exists(cs, s.Namespace, s.Name) {
			t.Errorf("%s/%s deleted", s.Namespace, s.Name)
		}
	}
}
