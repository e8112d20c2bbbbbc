// Package controllertest runs controllers against client-go's fake
// clientset for unit tests: the fake is taught what the API server does that
// controllers rely on (names from generateName, UIDs, generations), and
// informers are started and synced.
package controllertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svcnet/svcnet/internal/controller"
)

// NewClient returns a fake clientset holding objects, which fills in names
// from generateName, UIDs, and metadata.generation (1 on create, +1 on
// update) as the API server does.
func NewClient(objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	var n atomic.Int64
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
