package builtin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// testWebserver serves any file of the container's filesystem named by
// the request's path, as agnhost's test-webserver does, with its headers.
// Under runc the container's filesystem is agnhost's assembled image,
// with its /localhost.crt (porter's certificate for localhost, which the
// StatefulSet tests probe and move away to fail the probe); a host
// process shares the host's filesystem, so that file is served from
// memory there.
func testWebserver(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("test-webserver", flag.ContinueOnError)
	port := fs.Int("port", 80, "port to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// A host process has no image of its own: its certificate is made
	// here.
	var cert []byte
	if !inAgnhostImage() {
		pair, err := localhostKeyPair()
		if err != nil {
			return err
		}
		cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]})
	}
	files := http.FileServer(http.Dir("/"))
	return serve(ctx, []int{*port}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "private")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "DNT,X-Mx-ReqToken,Keep-Alive,User-Agent,X-Requested-With,Cache-Control,Content-Type")
		r.Header.Del("If-Modified-Since")
		if r.URL.Path == "/localhost.crt" && cert != nil {
			if _, err := os.Stat("/localhost.crt"); errors.Is(err, os.ErrNotExist) {
				_, _ = w.Write(cert)
				return
			}
		}
		files.ServeHTTP(w, r)
	}))
}

// inAgnhostImage reports a container of agnhost's image, which has its
// /localhost.key (a host process sees the host's files instead).
func inAgnhostImage() bool {
	_, err := os.Stat("/localhost.key")
	return err == nil
}

// LocalhostCertificate is a certificate for localhost (and 127.0.0.1,
// ::1) that signs itself and its key, PEM-encoded, as the agnhost image's
// localhost.crt and localhost.key.
func LocalhostCertificate() (cert, key []byte, err error) {
	pair, err := localhostKeyPair()
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("encode localhost key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// localhostKeyPair is a key and a certificate for localhost (and
// 127.0.0.1, ::1) that signs itself, as the agnhost image's localhost.crt.
func localhostKeyPair() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("localhost certificate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sign localhost certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
