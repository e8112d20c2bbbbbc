package serviceaccount

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func start(t *testing.T, cs *fake.Clientset) *Controller {
	t.Helper()
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		var err error
		if c, err = New(d); err != nil {
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

func account(namespace, name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// hasDefault waits until namespace has its default ServiceAccount.
func hasDefault(t *testing.T, cs *fake.Clientset, namespace string) *corev1.ServiceAccount {
	t.Helper()
	var sa *corev1.ServiceAccount
	controllertest.Eventually(t, func() string {
		var err error
		if sa, err = cs.CoreV1().ServiceAccounts(namespace).Get(context.Background(), DefaultName, metav1.GetOptions{}); err != nil {
			return fmt.Sprintf("ServiceAccount %s/default: %v", namespace, err)
		}
		return ""
	})
	return sa
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

func TestNamespacesGetDefault(t *testing.T) {
	cs := controllertest.NewClient(namespace("kube-system", corev1.NamespaceActive), namespace("default", corev1.NamespaceActive))
	start(t, cs)
	hasDefault(t, cs, "kube-system")
	hasDefault(t, cs, "default")

	// A new namespace gets one at once.
	created := time.Now()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), namespace("shop", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := hasDefault(t, cs, "shop")
	if d := time.Since(created); d > time.Second {
		t.Errorf("ServiceAccount took %v", d)
	}
	if len(sa.Secrets) != 0 || sa.AutomountServiceAccountToken != nil || len(sa.Labels) != 0 {
		t.Errorf("ServiceAccount %+v, want a bare one", sa)
	}
}

func TestDeletedIsRecreated(t *testing.T) {
	cs := controllertest.NewClient(namespace("shop", corev1.NamespaceActive), account("shop", DefaultName))
	start(t, cs)
	if err := cs.CoreV1().ServiceAccounts("shop").Delete(context.Background(), DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	hasDefault(t, cs, "shop")

	// Another ServiceAccount's deletion is no reason to write.
	if _, err := cs.CoreV1().ServiceAccounts("shop").Create(context.Background(), account("shop", "app"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts("shop").Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	// delete (test), create (controller), create and delete of app (test).
	if got := writes(cs); len(got) != 4 {
		t.Errorf("writes %q, want the one re-creation only", got)
	}
}

func TestTerminatingNamespaceSkipped(t *testing.T) {
	cs := controllertest.NewClient(namespace("going", corev1.NamespaceTerminating), namespace("shop", corev1.NamespaceActive))
	c := start(t, cs)
	hasDefault(t, cs, "shop")
	if err := c.sync(context.Background(), "going"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("going").Get(context.Background(), DefaultName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount in a terminating namespace: %v, want none", err)
	}

	// A namespace that begins terminating between the cache and the
	// write: the API server's refusal is no error, as upstream.
	cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, DefaultName, fmt.Errorf("namespace %s is being terminated", a.GetNamespace()))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
		return true, nil, err
	})
	if err := cs.CoreV1().ServiceAccounts("shop").Delete(context.Background(), DefaultName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, func() string {
		if _, err := c.accounts.ServiceAccounts("shop").Get(DefaultName); err == nil {
			return "the cache still has the ServiceAccount"
		}
		return ""
	})
	if err := c.sync(context.Background(), "shop"); err != nil {
		t.Errorf("sync: %v, want the refusal ignored", err)
	}
}

func TestNoWriteWhenInPlace(t *testing.T) {
	cs := controllertest.NewClient(
		namespace("kube-system", corev1.NamespaceActive), account("kube-system", DefaultName),
		namespace("shop", corev1.NamespaceActive), account("shop", DefaultName), account("shop", "app"),
	)
	c := start(t, cs)
	// Namespace updates bring syncs; none writes.
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
