package storage_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/pki"
	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// tlsFixture is an embedded member with certificates of a CA, and client
// certificates: the allowed client's, one of the same CA with another
// name, and one of another CA.
type tlsFixture struct {
	member                                 *storage.Embedded
	peerURL, caFile                        string
	client                                 storage.TLSFiles
	clientPair, otherNamePair, otherCAPair pki.Pair
}

func files(dir, name, caFile string) storage.TLSFiles {
	return storage.TLSFiles{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"), TrustedCAFile: caFile}
}

func startTLSMember(t *testing.T) *tlsFixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.LoadOrCreateCA(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFixture{caFile: filepath.Join(dir, "ca", "ca.crt")}
	names, ips := []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}
	for _, name := range []string{"server", "peer"} {
		if _, err := ca.Member(dir, name, storage.MemberName, names, ips); err != nil {
			t.Fatal(err)
		}
	}
	if f.clientPair, err = ca.Client(dir, "client", "kube-apiserver-etcd-client", nil); err != nil {
		t.Fatal(err)
	}
	if f.otherNamePair, err = ca.Client(dir, "admin", "svcnet-admin", []string{"system:masters"}); err != nil {
		t.Fatal(err)
	}
	if f.otherCAPair, err = other.Client(dir, "foreign", "kube-apiserver-etcd-client", nil); err != nil {
		t.Fatal(err)
	}
	f.client = files(dir, "client", f.caFile)
	f.peerURL = "https://127.0.0.1:" + strconv.Itoa(storagetest.FreePort(t))
	f.member, err = storage.StartEmbedded(context.Background(), storage.EmbeddedConfig{
		Dir: filepath.Join(dir, "etcd"), ClientURL: "https://127.0.0.1:" + strconv.Itoa(storagetest.FreePort(t)), PeerURL: f.peerURL,
		TLS: &storage.EmbeddedTLS{
			Server:    files(dir, "server", f.caFile),
			Peer:      files(dir, "peer", f.caFile),
			ClientCNs: []string{storage.MemberName, "kube-apiserver-etcd-client"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.member.Close)
	return f
}

// TestEmbeddedTLS: the member serves clients and peers over TLS only and
// takes a client only with a certificate of its CA and an allowed name;
// Connect's client with the allowed certificate reads and writes.
func TestEmbeddedTLS(t *testing.T) {
	f := startTLSMember(t)

	cli, err := storage.Connect([]string{f.member.ClientURL}, f.client)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/registry/k", "v"); err != nil {
		t.Fatalf("put with the client certificate: %v", err)
	}
	if resp, err := cli.Get(ctx, "/registry/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get with the client certificate: %v %v", resp, err)
	}

	// Without a certificate the storage client gets no answer.
	bare, err := storage.Connect([]string{f.member.ClientURL}, storage.TLSFiles{TrustedCAFile: f.caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := bare.Get(short, "/registry/k"); err == nil {
		t.Error("get without a client certificate succeeded")
	}

	cases := []struct {
		name string
		url  string
		cert *pki.Pair
		want string // in the error; "" for success
	}{
		{"allowed certificate", f.member.ClientURL, &f.clientPair, ""},
		{"no certificate", f.member.ClientURL, nil, "certificate required"},
		{"another CA's certificate", f.member.ClientURL, &f.otherCAPair, "unknown certificate authority"},
		{"the CA's certificate of another name", f.member.ClientURL, &f.otherNamePair, "bad certificate"},
		{"peer without a certificate", f.peerURL, nil, "certificate required"},
		{"peer with another CA's certificate", f.peerURL, &f.otherCAPair, "unknown certificate authority"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := getVersion(t, c.url, f.caFile, c.cert)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// getVersion asks url's /version over TLS, trusting caFile, presenting
// cert if set.
func getVersion(t *testing.T, url, caFile string, cert *pki.Pair) error {
	t.Helper()
	tc, err := storage.TLSFiles{TrustedCAFile: caFile}.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if cert != nil {
		c, err := cert.TLS()
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url + "/version")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s/version: %s", url, resp.Status)
	}
	return nil
}

// TestEmbeddedSchemes: a member with certificates serves https only, one
// without http only.
func TestEmbeddedSchemes(t *testing.T) {
	ctx := context.Background()
	_, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{Dir: t.TempDir(), ClientURL: storagetest.FreeURL(t),
		TLS: &storage.EmbeddedTLS{}})
	if err == nil || !strings.Contains(err.Error(), "the embedded etcd serves its clients over https only") {
		t.Errorf("http client URL with TLS: %v", err)
	}
	_, err = storage.StartEmbedded(ctx, storage.EmbeddedConfig{Dir: t.TempDir(), ClientURL: "https://127.0.0.1:" + strconv.Itoa(storagetest.FreePort(t))})
	if err == nil || !strings.Contains(err.Error(), "the embedded etcd has no certificates") {
		t.Errorf("https client URL without TLS: %v", err)
	}
}
