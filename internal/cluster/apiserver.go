// Package cluster assembles svcnet's components into running processes: the
// data dir layout, certificates and kubeconfig, embedded or external etcd,
// and the API server, for `svcnet up` and the component subcommands.
package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/version"

	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/all"
	"github.com/svcnet/svcnet/internal/storage"
)

// KubernetesVersion is the upstream release whose API svcnet serves: the
// k8s.io/api version in go.mod.
const KubernetesVersion = "v1.37.2"

// APIServerOptions configure the API server and its etcd.
type APIServerOptions struct {
	DataDir string
	// BindAddress is host:port for HTTPS (default 127.0.0.1:6443).
	BindAddress string
	// EtcdServers are external etcd client URLs; empty starts the embedded
	// member in DataDir/etcd.
	EtcdServers []string
	// EtcdClientURL and EtcdPeerURL place the embedded member.
	EtcdClientURL, EtcdPeerURL string
}

// DefaultDataDir is /var/lib/svcnet for root, else ~/.svcnet.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/svcnet"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".svcnet")
	}
	return ".svcnet"
}

// APIServer is a running API server with its storage.
type APIServer struct {
	// Kubeconfig is the admin kubeconfig's path.
	Kubeconfig string
	// URL is the server's https URL.
	URL string

	embedded *storage.Embedded
	client   *clientv3.Client
	done     chan error
}

// StartAPIServer starts etcd (unless external), the API server and its
// compactor; they run until ctx ends. Wait returns when all have stopped.
func StartAPIServer(ctx context.Context, o APIServerOptions) (*APIServer, error) {
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1:6443"
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	a := &APIServer{done: make(chan error, 1)}
	endpoints := o.EtcdServers
	if len(endpoints) == 0 {
		e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{
			Dir: filepath.Join(o.DataDir, "etcd"), ClientURL: o.EtcdClientURL, PeerURL: o.EtcdPeerURL,
		})
		if err != nil {
			return nil, err
		}
		a.embedded = e
		endpoints = []string{e.ClientURL}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	a.client = cli
	store := storage.New(cli, registry.JSONCodec{})

	set, err := all.Set()
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	oapi, err := openAPIHandler(set)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	srv, err := apiserver.New(apiserver.Config{
		Store: store, Resources: set, OpenAPI: oapi,
		Version: version.Info{Major: "1", Minor: minorOf(KubernetesVersion), GitVersion: KubernetesVersion,
			GitTreeState: "clean", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
			Platform: runtime.GOOS + "/" + runtime.GOARCH},
	})
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = srv.Bootstrap(bctx)
	cancel()
	if err != nil {
		a.stopStorage()
		return nil, err
	}

	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("bind address %q: %w", o.BindAddress, err)
	}
	tlsConfig, err := a.certificates(o.DataDir, host, port)
	if err != nil {
		a.stopStorage()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.BindAddress)
	if err != nil {
		a.stopStorage()
		return nil, fmt.Errorf("listen on %s: %w", o.BindAddress, err)
	}
	go func() {
		compactCtx, stop := context.WithCancel(ctx)
		go func() {
			store.RunCompactor(compactCtx, 5*time.Minute)
		}()
		err := srv.Serve(ctx, ln, tlsConfig)
		stop()
		a.stopStorage()
		a.done <- err
	}()
	slog.Info("API server serving", "url", a.URL, "etcd", strings.Join(endpoints, ","))
	return a, nil
}

// Wait blocks until the server and its storage have stopped.
func (a *APIServer) Wait() error { return <-a.done }

func (a *APIServer) stopStorage() {
	if a.client != nil {
		_ = a.client.Close()
	}
	if a.embedded != nil {
		a.embedded.Close()
	}
}

func minorOf(v string) string {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

// certificates loads or creates the CA, serving and admin certificates,
// writes the admin kubeconfig, and returns the server's TLS config.
func (a *APIServer) certificates(dataDir, host, port string) (*tls.Config, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		ips = append(ips, ip)
	} else if host != "" && ip == nil {
		names = append(names, host)
	}
	serving, err := ca.Serving(dir, "apiserver", names, ips)
	if err != nil {
		return nil, err
	}
	cert, err := serving.TLS()
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	admin, err := ca.Client(dir, "admin", "svcnet-admin", []string{"system:masters"})
	if err != nil {
		return nil, err
	}
	clientHost := host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		clientHost = "127.0.0.1"
	}
	a.URL = "https://" + net.JoinHostPort(clientHost, port)
	a.Kubeconfig = filepath.Join(dataDir, "kubeconfig")
	if err := WriteKubeconfig(a.Kubeconfig, a.URL, ca.CertPEM, admin); err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}
