package objectcache

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func TestCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string][]byte{"k": []byte("1")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}},
	)
	s := client.CoreV1()
	changed := make(chan string, 10)
	c := New(ctx, Source{
		Resource: corev1.Resource("secret"), Object: &corev1.Secret{},
		// The fake ignores field selectors: these apply them.
		List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			l, err := s.Secrets(ns).List(ctx, o)
			if err != nil {
				return nil, err
			}
			l.Items = slices.DeleteFunc(l.Items, func(sec corev1.Secret) bool { return !selects(o, &sec) })
			return l, nil
		},
		Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			w, err := s.Secrets(ns).Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return e, selects(o, e.Object.(*corev1.Secret)) }), nil
		},
		Get: func(ctx context.Context, ns, name string) (runtime.Object, error) {
			return s.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Client: client,
	}, func(ns, name string) { changed <- ns + "/" + name })
	defer func() { cancel(); c.Wait() }()

	value := func(name string) string {
		obj, err := c.Get(ctx, "ns", name)
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return string(obj.(*corev1.Secret).Data["k"])
	}
	// Not registered: read directly.
	if got := value("a"); got != "1" {
		t.Errorf("a = %q before any pod uses it", got)
	}
	if _, err := c.Get(ctx, "ns", "missing"); err == nil || err.Error() != `secret "missing" not found` {
		t.Errorf("a missing secret no pod uses: %v", err)
	}
	c.Register("pod-1", "ns", []string{"a", "missing", "a"})
	c.Register("pod-2", "ns", []string{"a"})
	if n := c.Watched(); n != 2 {
		t.Errorf("watching %d objects, want 2 (a, missing)", n)
	}
	wait := func(want string) {
		t.Helper()
		select {
		case got := <-changed:
			if got != want {
				t.Errorf("changed %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no change reported for %s", want)
		}
	}
	wait("ns/a") // the watch's first list
	if _, err := s.Secrets("ns").Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string][]byte{"k": []byte("2")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("ns/a")
	if got := value("a"); got != "2" {
		t.Errorf("a = %q after the update, want 2", got)
	}
	if _, err := c.Get(ctx, "ns", "missing"); !apierrors.IsNotFound(err) || err.Error() != `secret "missing" not found` {
		t.Errorf("a missing secret: %v", err)
	}

	c.Unregister("pod-1")
	if n := c.Watched(); n != 1 {
		t.Errorf("after pod-1 went, watching %d objects, want 1 (a, for pod-2)", n)
	}
	c.Register("pod-2", "ns", nil)
	if n := c.Watched(); n != 0 {
		t.Errorf("with no pod left, watching %d objects", n)
	}
}

// selects applies o's field selector (metadata.name only) to sec.
func selects(o metav1.ListOptions, sec *corev1.Secret) bool {
	return fields.ParseSelectorOrDie(o.FieldSelector).Matches(fields.Set{"metadata.name": sec.Name})
}
