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
	etcdHealthcheckClientCN = "kube-etcd-healthcheck-client"
	apiServerEtcdClientCN   = "kube-apiserver-etcd-client"
)

// EtcdHealthcheckClient is the etcdctl client certificate of the embedded
// etcd of the data dir, with the CA bundle that verifies the member.
func EtcdHealthcheckClient(dataDir string) storage.TLSFiles {
	dir := filepath.Join(dataDir, "pki")
	return pairFiles(dir, "etcd/healthcheck-client", filepath.Join(dir, etcdCAFile))
}

func pairFiles(dir, name, caFile string) storage.TLSFiles {
	return storage.TLSFiles{
		CertFile:      filepath.Join(dir, name+".crt"),
		KeyFile:       filepath.Join(dir, name+".key"),
		TrustedCAFile: caFile,
	}
}

// etcdCertificates issues (or reuses) the embedded member's certificates
// in dataDir/pki for its client and peer URLs, and returns them with the
// API server's client files. The member takes only the clients of these
// certificates: the cluster CA signs other clients' (nodes', users') too.
func etcdCertificates(ca *pki.CA, dataDir, clientURL, peerURL string) (*storage.EmbeddedTLS, storage.TLSFiles, error) {
	dir := filepath.Join(dataDir, "pki")
	caFile := filepath.Join(dir, etcdCAFile)
	if err := ca.WriteCert(caFile); err != nil {
		return nil, storage.TLSFiles{}, err
	}
	etcdDir := filepath.Join(dir, "etcd")
	for _, m := range []struct{ name, url string }{{"server", clientURL}, {"peer", peerURL}} {
		names, ips, err := etcdAltNames(m.url)
		if err != nil {
			return nil, storage.TLSFiles{}, err
		}
		if _, err := ca.Member(etcdDir, m.name, storage.MemberName, names, ips); err != nil {
			return nil, storage.TLSFiles{}, err
		}
	}
	if _, err := ca.Client(etcdDir, "healthcheck-client", etcdHealthcheckClientCN, nil); err != nil {
		return nil, storage.TLSFiles{}, err
	}
	if _, err := ca.Client(dir, "apiserver-etcd-client", apiServerEtcdClientCN, nil); err != nil {
		return nil, storage.TLSFiles{}, err
	}
	member := &storage.EmbeddedTLS{
		Server:    pairFiles(etcdDir, "server", caFile),
		Peer:      pairFiles(etcdDir, "peer", caFile),
		ClientCNs: []string{storage.MemberName, etcdHealthcheckClientCN, apiServerEtcdClientCN},
	}
	return member, pairFiles(dir, "apiserver-etcd-client", caFile), nil
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
