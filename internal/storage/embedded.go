// Package storage keeps API objects in etcd v3. It starts the embedded
// single-member etcd that `svcnet up` uses by default, connects to an external
// cluster otherwise, and offers the API server transactional get, list,
// create, update, delete and watch, where an object's resourceVersion is its
// etcd mod revision.
package storage

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EmbeddedConfig configures the embedded etcd member.
type EmbeddedConfig struct {
	// Dir holds the member's data (created if missing).
	Dir string
	// ClientURL is where etcdctl and the API server reach it
	// (default http://127.0.0.1:2379).
	ClientURL string
	// PeerURL is the member's peer address (default http://127.0.0.1:2380).
	PeerURL string
	// Log, if set, gets etcd's own log at info level, as etcd writes it
	// (JSON lines); otherwise etcd logs only what is fatal, to stderr.
	Log io.Writer
	// QuotaBackendBytes is etcd's --quota-backend-bytes: past it etcd
	// raises its NOSPACE alarm and refuses writes (0: etcd's 2 GiB).
	QuotaBackendBytes int64
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
	if c.ClientURL == "" {
		c.ClientURL = "http://127.0.0.1:2379"
	}
	if c.PeerURL == "" {
		c.PeerURL = "http://127.0.0.1:2380"
	}
	curl, err := url.Parse(c.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("etcd client URL %q: %w", c.ClientURL, err)
	}
	purl, err := url.Parse(c.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcd peer URL %q: %w", c.PeerURL, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "svcnet"
	cfg.Dir = filepath.Join(c.Dir)
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
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

// Close stops the member; every acknowledged write is already on disk.
func (e *Embedded) Close() { e.etcd.Close() }

// Err reports a fatal error of the running member.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }
