package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/pki"
)

// TestEtcdLockedDown: the embedded etcd of `svcnet up` on a fresh machine
// is kubeadm's: etcdctl without a client certificate, over plain HTTP,
// with a certificate of another CA, or with one of the cluster CA for
// another client (the admin's) is refused; with the certificate
// docs/etcd.md names it reads the /registry/ keys. Its peer port takes
// no client without a certificate either.
func TestEtcdLockedDown(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	c := startOnMachine(t, m, "--nodes", "0", "--disable", "coredns")
	other, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	foreignDir := t.TempDir()
	if _, err := other.Client(foreignDir, "client", "kube-etcd-healthcheck-client", nil); err != nil {
		t.Fatal(err)
	}
	// etcdctl runs on the machine, which sees its data dir at
	// /var/lib/svcnet as a user there does. (Its gRPC hides the member's
	// TLS alert behind a timeout: tlsAlert reads it.)
	onMachine := func(args ...string) (string, error) {
		script := `mount --bind "$1" /var/lib && shift && exec "$@"`
		cmd := exec.Command("ip", append([]string{"netns", "exec", m.name, "sh", "-c", script, "sh", m.varLib}, args...)...)
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	etcdctl := func(args ...string) (string, error) {
		return onMachine(append([]string{"etcdctl", "--dial-timeout=2s", "--command-timeout=3s"}, args...)...)
	}
	const pkiDir = defaultDataDir + "/pki"
	caFile := pkiDir + "/etcd/ca.crt"
	get := []string{"get", "/registry/namespaces/default", "--print-value-only"}
	for _, refused := range []struct {
		name      string
		url       string
		cert, key string
		alert     string // the member's TLS alert; "": plain HTTP
	}{
		{name: "no certificate", url: "https://127.0.0.1:2379", alert: "tls: certificate required"},
		{name: "plain HTTP", url: "http://127.0.0.1:2379"},
		{name: "another CA's certificate", url: "https://127.0.0.1:2379", cert: filepath.Join(foreignDir, "client.crt"), key: filepath.Join(foreignDir, "client.key"), alert: "tls: unknown certificate authority"},
		{name: "the admin's certificate", url: "https://127.0.0.1:2379", cert: pkiDir + "/admin.crt", key: pkiDir + "/admin.key", alert: "tls: bad certificate"},
		{name: "the peer port without a certificate", url: "https://127.0.0.1:2380", alert: "tls: certificate required"},
	} {
		t.Run(refused.name, func(t *testing.T) {
			args := []string{"--endpoints=" + refused.url}
			if refused.alert != "" {
				args = append(args, "--cacert="+caFile)
			}
			if refused.cert != "" {
				args = append(args, "--cert="+refused.cert, "--key="+refused.key)
			}
			if out, err := etcdctl(append(args, get...)...); err == nil || strings.Contains(out, "Namespace") {
				t.Errorf("etcdctl %s was not refused: %v:\n%s", strings.Join(args, " "), err, out)
			}
			if refused.alert == "" {
				return
			}
			// The machine's paths, as the test sees them.
			host := func(p string) string { return strings.Replace(p, defaultDataDir, c.dataDir, 1) }
			if err := tlsAlert(m.name, strings.TrimPrefix(refused.url, "https://"), host(caFile), host(refused.cert), host(refused.key)); err == nil || !strings.Contains(err.Error(), refused.alert) {
				t.Errorf("TLS to %s: %v, want %q", refused.url, err, refused.alert)
			}
		})
	}
	cacert := "--cacert=" + caFile
	t.Run("the documented certificate", func(t *testing.T) {
		out, err := etcdctl(append([]string{cacert, "--cert=" + pkiDir + "/etcd/healthcheck-client.crt", "--key=" + pkiDir + "/etcd/healthcheck-client.key"}, get...)...)
		if err != nil || !strings.Contains(out, `"kind":"Namespace"`) || !strings.Contains(out, `"name":"default"`) {
			t.Errorf("etcdctl with the healthcheck client certificate: %v:\n%s", err, out)
		}
	})
	// The API server reaches etcd with its own certificate.
	c.must("create", "configmap", "through-the-api", "--from-literal=a=b")
	out, err := etcdctl(cacert, "--cert="+pkiDir+"/apiserver-etcd-client.crt", "--key="+pkiDir+"/apiserver-etcd-client.key",
		"get", "--prefix", "--keys-only", "/registry/configmaps/default/through-the-api")
	if err != nil || strings.TrimSpace(out) != "/registry/configmaps/default/through-the-api" {
		t.Errorf("etcdctl with the API server's certificate: %v:\n%s", err, out)
	}
}

// tlsAlert connects from the network namespace netnsName to addr over TLS,
// trusting caFile and presenting the certificate (if named), and returns
// the error of the first read: the server's alert if it refuses the
// client. (TLS 1.3 finishes the client's handshake before the server has
// checked the client's certificate.)
func tlsAlert(netnsName, addr, caFile, certFile, keyFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cfg := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}
	cfg.RootCAs.AppendCertsFromPEM(ca)
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	var conn net.Conn
	if err := netns.Do(netns.Path(netnsName), func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	tc := tls.Client(conn, cfg)
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		return err
	}
	_, err = tc.Read(make([]byte, 1))
	return err
}
