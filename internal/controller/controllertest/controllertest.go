// Package controllertest runs controllers against client-go's fake
// clientset for unit tests: the fake is taught what the API server does that
// controllers rely on (names from generateName, UIDs, generations), and
// informers are started and synced.
package controllertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/controller"
)

// NewClient returns a fake clientset holding objects, which fills in names
// from generateName, UIDs, and metadata.generation (1 on create, +1 on
// update) as the API server does, writes only the status on an update of
// the status subresource, and keeps resource versions as it does:
// each write stores a new one, and an update or patch that carries a
// resource version other than the stored one fails with a Conflict, so a
// controller writing from a stale cache retries as it must against a real
// server instead of overwriting a newer write.
func NewClient(objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	var n atomic.Int64
	versions := &versionedTracker{ObjectTracker: cs.Tracker()}
	// The fake runs one action at a time through its reactors, so the
	// check of a resource version and the write after it are atomic.
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.UpdateActionImpl:
			if a.GetSubresource() == "status" {
				if err := statusOnly(cs.Tracker(), a); err != nil {
					return true, nil, err
				}
			}
			return k8stesting.ObjectReaction(versions)(a)
		case k8stesting.CreateActionImpl, k8stesting.PatchActionImpl:
			return k8stesting.ObjectReaction(versions)(a)
		}
		return false, nil, nil
	})
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		m, err := meta.Accessor(a.(k8stesting.CreateAction).GetObject())
		if err != nil || a.GetSubresource() != "" {
			return false, nil, nil
		}
		if m.GetName() == "" && m.GetGenerateName() != "" {
			m.SetName(fmt.Sprintf("%s%05d", m.GetGenerateName(), n.Add(1)))
		}
		if m.GetUID() == "" {
			m.SetUID(types.UID(uuid.NewString()))
		}
		m.SetGeneration(1)
		return false, nil, nil
	})
	cs.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "" {
			return false, nil, nil
		}
		m, err := meta.Accessor(a.(k8stesting.UpdateAction).GetObject())
		if err != nil {
			return false, nil, nil
		}
		old, err := cs.Tracker().Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return false, nil, nil
		}
		om, _ := meta.Accessor(old)
		m.SetUID(om.GetUID())
		m.SetGeneration(om.GetGeneration() + 1)
		return false, nil, nil
	})
	return cs
}

// statusOnly turns the object of a status update into the stored object
// with the update's status and resource version, as the API server's
// status strategies do.
func statusOnly(tracker k8stesting.ObjectTracker, a k8stesting.UpdateActionImpl) error {
	obj := a.GetObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("object metadata: %w", err)
	}
	stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
	if err != nil {
		return err
	}
	was, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return fmt.Errorf("stored object: %w", err)
	}
	now, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("updated object: %w", err)
	}
	was["status"] = now["status"]
	rv := m.GetResourceVersion()
	// Reset obj before filling it, so that no field of the update stays.
	reflect.ValueOf(obj).Elem().SetZero()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(was, obj); err != nil {
		return fmt.Errorf("status update of %s: %w", m.GetName(), err)
	}
	m.SetResourceVersion(rv)
	return nil
}

// RetryOnConflict runs change, which reads an object, changes it and writes
// it back, again while the write is refused with a Conflict, as a client of
// the API server does when it races a controller; any other error fails
// the test.
func RetryOnConflict(t *testing.T, change func() error) {
	t.Helper()
	backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 10, Cap: 500 * time.Millisecond}
	if err := retry.RetryOnConflict(backoff, change); err != nil {
		t.Fatal(err)
	}
}

// versionedTracker stores a new resource version with each write and
// refuses an update or patch whose resource version is not the stored one.
type versionedTracker struct {
	k8stesting.ObjectTracker
	last atomic.Int64
}

func (t *versionedTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if err := t.stamp(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if err := t.check(gvr, obj, ns); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *versionedTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.check(gvr, obj, ns); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

// check fails with the API server's Conflict when obj names a resource
// version other than the stored object's, and stamps obj with a new one.
// An empty resource version is an unconditional write, as upstream allows.
func (t *versionedTracker) check(gvr schema.GroupVersionResource, obj runtime.Object, ns string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("object metadata: %w", err)
	}
	if stored, err := t.Get(gvr, ns, m.GetName()); err == nil {
		sm, err := meta.Accessor(stored)
		if err != nil {
			return fmt.Errorf("stored object metadata: %w", err)
		}
		if rv := m.GetResourceVersion(); rv != "" && sm.GetResourceVersion() != "" && rv != sm.GetResourceVersion() {
			return apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
	}
	return t.stamp(obj)
}

func (t *versionedTracker) stamp(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("object metadata: %w", err)
	}
	m.SetResourceVersion(strconv.FormatInt(t.last.Add(1), 10))
	return nil
}

// Start builds controllers on fresh informers over cs, starts the
// informers and returns the controllers' shared dependencies; everything
// stops when the test ends.
func Start(t *testing.T, cs *fake.Clientset, build func(ctx context.Context, d controller.Deps) []func(context.Context)) controller.Deps {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(cs, 0)
	d := controller.Deps{Client: cs, Informers: factory, Metrics: controller.NewMetrics(prometheus.NewRegistry())}
	runs := build(ctx, d)
	factory.Start(ctx.Done())
	done := make(chan struct{}, len(runs))
	for _, run := range runs {
		go func() {
			run(ctx)
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			<-done
		}
		factory.Shutdown()
	})
	return d
}

// Eventually polls cond until it returns "" or five seconds pass, then
// fails the test with cond's last message.
func Eventually(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
