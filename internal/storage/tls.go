package storage

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TLSFiles name the PEM files of one end of a TLS connection to or from
// etcd: its certificate and key, and the CA bundle the other end's
// certificate must verify against. They are etcd's --cert-file, --key-file
// and --trusted-ca-file, and kube-apiserver's --etcd-certfile,
// --etcd-keyfile and --etcd-cafile.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
}

// IsZero says whether no file is named.
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

func (f TLSFiles) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.TrustedCAFile}
}

// ClientTLS is the TLS configuration of a client with the files: it
// presents the certificate, if named, and trusts the CA (the system's
// roots when none is named).
func (f TLSFiles) ClientTLS() (*tls.Config, error) {
	tc, err := f.info().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: %w", err)
	}
	return tc, nil
}

// Connect returns a client of the etcd at endpoints. With files it speaks
// TLS, presenting the certificate and trusting the CA (the system's roots
// when none is named), as kube-apiserver's storage client; without, it
// speaks plain HTTP to http endpoints.
func Connect(endpoints []string, files TLSFiles) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if !files.IsZero() {
		tc, err := files.ClientTLS()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}
