// Package storage keeps API objects in etcd v3. It starts the embedded
// single-member etcd that `svcnet up` uses by default (serving over TLS to
// clients and peers with certificates only, as kubeadm's etcd), connects to
// an external cluster otherwise, and offers the API server transactional get, list,
// create, update, delete and watch, where an object's resourceVersion is its
// etcd mod revision.
package storage

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// MemberName is the embedded member's name (etcd's --name), the common
// name of its certificates.
const MemberName = "svcnet"

// EmbeddedConfig configures the embedded etcd member.
type EmbeddedConfig struct {
	// Dir holds the member's data (created if missing).
	Dir string
	// ClientURL is where etcdctl and the API server reach it (default
	// https://127.0.0.1:2379, http:// without TLS).
	ClientURL string
	// PeerURL is the member's peer address (default
	// https://127.0.0.1:2380, http:// without TLS).
	PeerURL string
	// TLS, if set, has the member serve clients and peers over TLS only,
	// and take only those with a certificate; without it the member
	// serves plain HTTP to anyone (tests of the storage layer).
	TLS *EmbeddedTLS
	// Log, if set, gets etcd's own log at info level, as etcd writes it
	// (JSON lines); otherwise etcd logs only what is fatal, to stderr.
	Log io.Writer
	// QuotaBackendBytes is etcd's --quota-backend-bytes: past it etcd
	// raises its NOSPACE alarm and refuses writes (0: etcd's 2 GiB).
	QuotaBackendBytes int64
}

// EmbeddedTLS are the embedded member's certificates, as etcd's flags of
// the same meaning.
type EmbeddedTLS struct {
	// Server is --cert-file, --key-file and --trusted-ca-file with
	// --client-cert-auth: the member's certificate to clients, and the CA
	// their certificates must be signed by. The member's gRPC gateway
	// presents this certificate to the member as a client too, so it must
	// be for client and server use.
	Server TLSFiles
	// Peer is --peer-cert-file, --peer-key-file, --peer-trusted-ca-file
	// with --peer-client-cert-auth; a peer's certificate must also name the
	// address it connects from (etcd checks it).
	Peer TLSFiles
	// ClientCNs, if set, are the only common names a client certificate
	// may have (etcd's AllowedCNs): where the trusted CA signs other
	// clients' certificates too, they are refused. Server's must be one.
	ClientCNs []string
}

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd      *embed.Etcd
	quota     int64
	ClientURL string
	// Started is when the member started.
	Started time.Time
}

// StartEmbedded starts a single-member etcd and waits until it serves.
func StartEmbedded(ctx context.Context, c EmbeddedConfig) (*Embedded, error) {
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	if c.ClientURL == "" {
		c.ClientURL = scheme + "://127.0.0.1:2379"
	}
	if c.PeerURL == "" {
		c.PeerURL = scheme + "://127.0.0.1:2380"
	}
	curl, err := memberURL("client", c.ClientURL, scheme)
	if err != nil {
		return nil, err
	}
	purl, err := memberURL("peer", c.PeerURL, scheme)
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = MemberName
	cfg.Dir = c.Dir
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
	if t := c.TLS; t != nil {
		cfg.ClientTLSInfo = t.Server.info()
		cfg.ClientTLSInfo.ClientCertAuth = true
		cfg.ClientTLSInfo.AllowedCNs = t.ClientCNs
		cfg.PeerTLSInfo = t.Peer.info()
		cfg.PeerTLSInfo.ClientCertAuth = true
	}
	started := time.Now()
	if c.Log != nil {
		// etcd's format, its default level.
		cfg.LogLevel = "info"
		// What makes etcd exit (a full disk: the WAL cannot be written)
		// also goes to stderr: the log file may be on that disk.
		enc := zapcore.NewJSONEncoder(logutil.DefaultZapLoggerConfig.EncoderConfig)
		core := zapcore.NewTee(
			zapcore.NewCore(enc, zapcore.AddSync(c.Log), zap.InfoLevel),
			zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zap.DPanicLevel),
		)
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(os.Stderr))))
	} else {
		// etcd logs its own shutdown as errors; real failures reach Err().
		cfg.LogLevel = "fatal"
		cfg.LogOutputs = []string{"stderr"}
	}
	// Watch progress notifications drive the API server's watch bookmarks.
	cfg.WatchProgressNotifyInterval = 30 * time.Second
	cfg.QuotaBackendBytes = c.QuotaBackendBytes

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after 60s", c.Dir)
	}
	quota := c.QuotaBackendBytes
	if quota <= 0 {
		quota = DefaultQuotaBackendBytes
	}
	return &Embedded{etcd: e, quota: quota, ClientURL: curl.String(), Started: started}, nil
}

// memberURL parses the member's client or peer URL, which must be of the
// scheme its TLS settings serve.
func memberURL(what, raw, scheme string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("etcd %s URL %q: %w", what, raw, err)
	}
	if u.Scheme != scheme {
		if scheme == "https" {
			return nil, fmt.Errorf("etcd %s URL %q: the embedded etcd serves its %ss over https only", what, raw, what)
		}
		return nil, fmt.Errorf("etcd %s URL %q: the embedded etcd has no certificates: give an http URL", what, raw)
	}
	return u, nil
}

// Close stops the member; every acknowledged write is already on disk.
func (e *Embedded) Close() { e.etcd.Close() }

// Err reports a fatal error of the running member.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }
