package cluster

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// startTestAPIServer starts an API server with opts on a fresh data dir
// and free loopback ports, stopped when the test ends, and returns its
// admin's client configuration.
func startTestAPIServer(t *testing.T, opts APIServerOptions) (*APIServer, *rest.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", storagetest.FreePort(t)) }
	opts.DataDir, opts.BindAddress = t.TempDir(), addr()
	opts.EtcdClientURL, opts.EtcdPeerURL = "https://"+addr(), "https://"+addr()
	api, err := StartAPIServer(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := api.Wait(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", api.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return api, cfg
}
