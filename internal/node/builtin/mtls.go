package builtin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"time"
)

// mtlsPollInterval is how often agnhost mtlsclient asks its server
// (tests shorten it).
var mtlsPollInterval = 10 * time.Second

// mtlsServer is agnhost mtlsserver, the server of upstream's pod
// certificate tests: HTTPS on --listen with the key and certificate chain
// of the credential bundle --server-creds (a podCertificate projection's
// credentialBundlePath), asking clients for a certificate. GET
// /spiffe-echo verifies the client's certificate with the anchors of
// --spiffe-trust-bundle (read anew at each request) and answers "Client
// Identity: " and the certificate's one URI name.
func mtlsServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mtlsserver", flag.ContinueOnError)
	listen := fs.String("listen", "", "<address>:<port> to listen on")
	creds := fs.String("server-creds", "", "Credential bundle with the server key and certificate chain")
	trust := fs.String("spiffe-trust-bundle", "", "Trust bundle for verifying client certificates")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *listen == "" || *creds == "" || *trust == "" {
		return errors.New("missing required flags")
	}
	if err := serveSPIFFEEcho(ctx, *listen, *creds, *trust); err != nil {
		return fmt.Errorf("error while serving: %w", err)
	}
	return nil
}

func serveSPIFFEEcho(ctx context.Context, listen, creds, trust string) error {
	anchors, err := os.ReadFile(trust)
	if err != nil {
		return fmt.Errorf("while reading SPIFFE trust anchors: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(anchors) {
		return errors.New("failed to append client certs from PEM")
	}
	pair, err := tls.LoadX509KeyPair(creds, creds)
	if err != nil {
		return fmt.Errorf("while loading server key pair: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /spiffe-echo", spiffeEcho(trust))
	s := &http.Server{
		Handler: mux,
		// Each endpoint verifies the client's certificate itself.
		TLSConfig:      &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert},
		ReadTimeout:    30 * time.Second,
		WriteTimeout:   30 * time.Second,
		MaxHeaderBytes: 1 << 20,
	}
	if err := runTLS(ctx, listen, s); err != nil {
		return fmt.Errorf("while listening: %w", err)
	}
	return nil
}

// spiffeEcho answers a client whose certificate chains to the anchors of
// the file trust with its SPIFFE ID, in agnhost's words.
func spiffeEcho(trust string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		const authRequired = "SPIFFE client certificate authentication required"
		peers := r.TLS.PeerCertificates
		if len(peers) == 0 {
			http.Error(w, authRequired, http.StatusUnauthorized)
			return
		}
		anchors, err := os.ReadFile(trust)
		if err != nil {
			log.Printf("Error while reading SPIFFE trust anchors: %v", err)
			http.Error(w, "Internal Error", http.StatusInternalServerError)
			return
		}
		roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
		roots.AppendCertsFromPEM(anchors)
		for _, c := range peers[1:] {
			intermediates.AddCert(c)
		}
		leaf := peers[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates}); err != nil {
			log.Printf("Error while verifying SPIFFE client certificate: %v", err)
			http.Error(w, authRequired, http.StatusUnauthorized)
			return
		}
		if len(leaf.URIs) != 1 {
			log.Printf("SPIFFE client certificate did not have 1 URI SAN, count: %d", len(leaf.URIs))
			http.Error(w, "Malformed SPIFFE certificate", http.StatusUnauthorized)
			return
		}
		if _, err := w.Write([]byte("Client Identity: " + leaf.URIs[0].String())); err != nil {
			log.Printf("Error while writing response: %v", err)
		}
	}
}

// mtlsClient is agnhost mtlsclient, the client of upstream's pod
// certificate tests: every ten seconds it gets --fetch-url, trusting the
// anchors of --server-trust-bundle and presenting the key and chain of
// the credential bundle --client-cred-bundle (both read anew each time),
// and logs "Got response body: " and the answer, or klog's error line.
func mtlsClient(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mtlsclient", flag.ContinueOnError)
	fetchURL := fs.String("fetch-url", "", "server URL to poll")
	trust := fs.String("server-trust-bundle", "", "File with trust anchors to verify the server certificate")
	creds := fs.String("client-cred-bundle", "", "File with client key and certificate chain")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *fetchURL == "" || *trust == "" || *creds == "" {
		return errors.New("missing required flags")
	}
	if _, err := url.ParseRequestURI(*fetchURL); err != nil {
		return fmt.Errorf("invalid --fetch-url: %w", err)
	}
	ready()
	t := time.NewTicker(mtlsPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		body, err := fetchMTLS(ctx, *fetchURL, *trust, *creds)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%swhile sending requests to the server: %v\n", klogHeader('E', time.Now(), "client.go:71"), err)
			continue
		}
		log.Printf("Got response body: %s", body)
	}
}

// fetchMTLS gets target over mutual TLS and returns the answer's body.
func fetchMTLS(ctx context.Context, target, trust, creds string) (string, error) {
	anchors, err := os.ReadFile(trust)
	if err != nil {
		return "", fmt.Errorf("while reading service trust bundle: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(anchors)
	bundle, err := os.ReadFile(creds)
	if err != nil {
		return "", fmt.Errorf("while reading client credential bundle: %w", err)
	}
	cert, err := credentialBundle(bundle)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", fmt.Errorf("while getting URL: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("while getting URL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return "", fmt.Errorf("non-2xx status %d %q", resp.StatusCode, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("while reading body: %w", err)
	}
	return string(body), nil
}

// credentialBundle is the TLS certificate of a credential bundle: its
// PKCS#8 PRIVATE KEY block and its CERTIFICATE blocks, leaf first.
func credentialBundle(bundle []byte) (tls.Certificate, error) {
	var cert tls.Certificate
	for {
		var b *pem.Block
		if b, bundle = pem.Decode(bundle); b == nil {
			break
		}
		switch b.Type {
		case "PRIVATE KEY":
			key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return cert, fmt.Errorf("while parsing private key from credential bundle: %w", err)
			}
			cert.PrivateKey = key
		case "CERTIFICATE":
			cert.Certificate = append(cert.Certificate, b.Bytes)
		}
	}
	if cert.PrivateKey == nil {
		return cert, errors.New("client credential bundle had no private key")
	}
	if len(cert.Certificate) == 0 {
		return cert, errors.New("client credential bundle had no certificates")
	}
	return cert, nil
}

// noArgs refuses positional arguments, as agnhost's commands that take
// none do.
func noArgs(fs *flag.FlagSet) error {
	if n := fs.NArg(); n > 0 {
		return fmt.Errorf("accepts at most 0 arg(s), received %d", n)
	}
	return nil
}
