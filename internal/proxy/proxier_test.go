package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// recordingBackend hands each Update it gets to the test.
type recordingBackend struct{ updates chan Update }

func (b *recordingBackend) Sync(ctx context.Context, u Update) (Stats, error) {
	select {
	case b.updates <- u:
	case <-ctx.Done():
	}
	return Stats{}, nil
}

func (b *recordingBackend) Cleanup() error { return nil }

// The first sync waits for the informers' initial lists: however slow the
// EndpointSlice list, the first (full) sync has the Service's endpoints,
// not a Service that looks as if it had none (and would be rejected).
func TestRunFirstSyncHasTheInitialLists(t *testing.T) {
	client := fake.NewClientset(service(httpPort()), slice("web-1", "", ep{"10.244.0.5", true, true, false, "node-a"}))
	b := &recordingBackend{updates: make(chan Update)}
	// The list answers after the backend's first sync, or after a while.
	listed := make(chan struct{})
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-listed:
		case <-time.After(200 * time.Millisecond):
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: client, NodeName: "node-a", Backend: b, Metrics: NewMetrics(prometheus.NewRegistry())})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case u := <-b.updates:
		close(listed)
		if !u.Full || u.Services[web] == nil || len(u.Services[web].Ports[0].ClusterEndpoints()) != 1 {
			t.Errorf("first sync: full %v, services %v", u.Full, u.Services)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no sync")
	}
}
