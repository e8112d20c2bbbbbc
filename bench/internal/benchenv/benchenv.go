// Package benchenv starts what the benchmarks run against, in the
// benchmark's own process: an API server on embedded etcd in a temporary
// directory on loopback ports, with a client that no rate limit slows
// down; and it spreads a benchmark's requests over workers.
package benchenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/cluster"
)

// FreeAddr is a loopback host:port that nobody listens on now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Server is a running API server.
type Server struct {
	*cluster.APIServer
	// Client is unthrottled, as Config, for other clients.
	Client kubernetes.Interface
	Config *rest.Config
	// DataDir is the server's data dir (its pki holds the cluster CA).
	DataDir string

	stop func()
}

// StartServer starts an API server on embedded etcd in a new temporary
// directory; Stop stops it and removes the directory. Options, if given,
// adjust the server's options.
func StartServer(ctx context.Context, options ...func(*cluster.APIServerOptions)) (*Server, error) {
	// A free port may be taken by another test before the server binds
	// it: then the server starts again on other ports.
	for attempt := 1; ; attempt++ {
		s, err := startServer(ctx, options...)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			return s, err
		}
	}
}

func startServer(ctx context.Context, options ...func(*cluster.APIServerOptions)) (*Server, error) {
	dir, err := os.MkdirTemp("", "svcnet-bench")
	if err != nil {
		return nil, err
	}
	var addrs [3]string
	for i := range addrs {
		if addrs[i], err = FreeAddr(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	o := cluster.APIServerOptions{
		DataDir: dir, BindAddress: addrs[0], EtcdClientURL: "https://" + addrs[1], EtcdPeerURL: "https://" + addrs[2],
	}
	for _, f := range options {
		f(&o)
	}
	api, err := cluster.StartAPIServer(sctx, o)
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{APIServer: api, DataDir: dir, stop: func() { cancel(); _ = api.Wait(); os.RemoveAll(dir) }}
	cfg, err := clientcmd.BuildConfigFromFlags("", api.Kubeconfig)
	if err == nil {
		cfg.QPS, cfg.Burst = 1e6, 1e6
		s.Config = cfg
		s.Client, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("client of the API server: %w", err)
	}
	if err := DefaultServiceAccount(ctx, s.Client, metav1.NamespaceDefault); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// DefaultServiceAccount creates the namespace's default ServiceAccount,
// which pods run as, as the controller manager's serviceaccount
// controller does on a cluster (benchmarks run without it).
func DefaultServiceAccount(ctx context.Context, client kubernetes.Interface, namespace string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the default ServiceAccount of %s: %w", namespace, err)
	}
	return nil
}

// Stop stops the API server and removes its directory.
func (s *Server) Stop() { s.stop() }

// Parallel runs f(0..n-1) on workers goroutines and returns the first
// error; after an error no new call starts.
func Parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
