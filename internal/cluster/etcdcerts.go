package cluster

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"

	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/storage"
)

// The embedded etcd's certificates, in kubeadm's layout under the data
// dir's pki (kubeadm's /etc/kubernetes/pki), all issued by the cluster CA:
//
//	etcd/ca.crt                        the CA etcd trusts: the cluster CA's certificate
//	etcd/server.crt, .key              the member's, to its clients
//	etcd/peer.crt, .key                the member's, to its peers
//	etcd/healthcheck-client.crt, .key  a client's, for etcdctl
//	apiserver-etcd-client.crt, .key    the API server's client
const (
	etcdCAFile              = "etcd/ca.crt"
	etcdServer              = "etcd/server"
	etcdPeer                = "etcd/peer"
	etcdHealthcheckClient   = "etcd/healthcheck-client"
	etcdHealthcheckClientCN = "kube-etcd-healthcheck-client"
	apiServerEtcdClient     = "apiserver-etcd-client"
	apiServerEtcdClientCN   = "kube-apiserver-etcd-client"
)

// pkiFiles are the pair name in the data dir's pki, with etcd's CA bundle.
func pkiFiles(dataDir, name string) storage.TLSFiles {
	dir := filepath.Join(dataDir, "pki")
	return storage.TLSFiles{
		CertFile:      filepath.Join(dir, name+".crt"),
		KeyFile:       filepath.Join(dir, name+".key"),
		TrustedCAFile: filepath.Join(dir, etcdCAFile),
	}
}

// etcdCertificates issues (or reuses) the embedded member's certificates
// in dataDir/pki for its client and peer URLs, and returns them with the
// API server's client files. The member takes only the clients of these
// certificates: the cluster CA signs other clients' (nodes', users') too.
func etcdCertificates(ca *pki.CA, dataDir, clientURL, peerURL string) (*storage.EmbeddedTLS, storage.TLSFiles, error) {
	dir := filepath.Join(dataDir, "pki")
	if err := ca.WriteCert(filepath.Join(dir, etcdCAFile)); err != nil {
		return nil, storage.TLSFiles{}, err
	}
	for _, m := range []struct{ name, url string }{{etcdServer, clientURL}, {etcdPeer, peerURL}} {
		names, ips, err := etcdAltNames(m.url)
		if err != nil {
			return nil, storage.TLSFiles{}, err
		}
		if _, err := ca.Member(dir, m.name, storage.MemberName, names, ips); err != nil {
			return nil, storage.TLSFiles{}, err
		}
	}
	for _, c := range []struct{ name, cn string }{
		{etcdHealthcheckClient, etcdHealthcheckClientCN}, {apiServerEtcdClient, apiServerEtcdClientCN},
	} {
		if _, err := ca.Client(dir, c.name, c.cn, nil); err != nil {
			return nil, storage.TLSFiles{}, err
		}
	}
	member := &storage.EmbeddedTLS{
		Server:    pkiFiles(dataDir, etcdServer),
		Peer:      pkiFiles(dataDir, etcdPeer),
		ClientCNs: []string{storage.MemberName, etcdHealthcheckClientCN, apiServerEtcdClientCN},
	}
	return member, pkiFiles(dataDir, apiServerEtcdClient), nil
}

// etcdAltNames are kubeadm's names of an etcd member (localhost,
// 127.0.0.1, ::1) and the host of its URL.
func etcdAltNames(raw string) ([]string, []net.IP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("etcd URL %q: %w", raw, err)
	}
	names, ips := []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	switch ip := net.ParseIP(u.Hostname()); {
	case ip != nil && !ip.IsUnspecified():
		ips = append(ips, ip)
	case ip == nil && u.Hostname() != "":
		names = append(names, u.Hostname())
	}
	return names, ips, nil
}
