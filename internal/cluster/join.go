package cluster

// A node joining with a bootstrap token, as kubeadm join and the kubelet's
// --bootstrap-kubeconfig do it: token discovery finds and verifies the
// cluster's CA, then TLS bootstrapping gets the node a client certificate
// through a CertificateSigningRequest made with the token, and the node
// runs with the kubeconfig that holds it.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/pki"
)

// JoinOptions are svcnet node's flags for joining with a bootstrap token
// (kubeadm join's).
type JoinOptions struct {
	// Server is the API server's https URL cluster-info is read from.
	Server string
	// Token is the bootstrap token "<id>.<secret>".
	Token string
	// CACertHashes are the pins the cluster CA must match one of
	// ("sha256:<hex>", kubeadm's --discovery-token-ca-cert-hash).
	CACertHashes []string
}

// joinRetry is how often discovery asks for cluster-info again (kubeadm:
// 5s), and joinTimeout how long it keeps asking (kubeadm: 5 minutes).
const (
	joinRetry   = 2 * time.Second
	joinTimeout = 5 * time.Minute
)

// nodeKubeconfigName is the node's kubeconfig in its data dir, kubeadm's
// kubelet.conf.
const nodeKubeconfigName = "kubelet.conf"

// joinNode returns the kubeconfig of node name: the one a previous join
// wrote when its certificate is still valid, else one made now by
// discovery and TLS bootstrapping.
func joinNode(ctx context.Context, o JoinOptions, dataDir, name string) (string, error) {
	path := filepath.Join(dataDir, nodeKubeconfigName)
	if valid, err := validKubeconfig(path, time.Now()); err != nil {
		return "", err
	} else if valid {
		slog.Info("node kubeconfig present: not joining again", "path", path)
		return path, nil
	}
	cluster, err := discover(ctx, o)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	pair, err := bootstrapClientCertificate(ctx, cluster, o.Token, name)
	if err != nil {
		return "", fmt.Errorf("TLS bootstrap: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	if err := WriteKubeconfig(path, cluster.Host, cluster.CAData, pair); err != nil {
		return "", err
	}
	slog.Info("joined: node kubeconfig written", "path", path, "server", cluster.Host)
	return path, nil
}

// validKubeconfig says whether path holds a kubeconfig with a client
// certificate valid at now.
func validKubeconfig(path string, now time.Time) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return false, fmt.Errorf("load node kubeconfig %s: %w", path, err)
	}
	certs, err := certutil.ParseCertsPEM(cfg.CertData)
	if err != nil {
		return false, nil
	}
	return now.After(certs[0].NotBefore) && now.Before(certs[0].NotAfter), nil
}

// discover is kubeadm's token discovery: cluster-info read without
// checking the server's certificate, its kubeconfig verified with the
// token's JWS signature, its CA checked against the pins, cluster-info
// read again over TLS verified with that CA and found the same. It
// returns cluster-info's server and CA, without credentials.
func discover(ctx context.Context, o JoinOptions) (*rest.Config, error) {
	tok, err := bootstraptoken.Parse(o.Token)
	if err != nil || o.Token == "" {
		return nil, fmt.Errorf("--token: %w", err)
	}
	if len(o.CACertHashes) == 0 {
		return nil, errors.New("--discovery-token-ca-cert-hash is required: it pins the cluster CA (svcnet token create --print-join-command prints it)")
	}
	insecure := &rest.Config{Host: o.Server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	first, err := clusterInfo(ctx, insecure, tok.ID)
	if err != nil {
		return nil, err
	}
	kubeconfig := first.Data[bootstrapapi.KubeConfigKey]
	if kubeconfig == "" {
		return nil, fmt.Errorf("there is no %s key in the %s ConfigMap. This API Server isn't set up for token bootstrapping, can't connect",
			bootstrapapi.KubeConfigKey, bootstrapapi.ConfigMapClusterInfo)
	}
	if !jws.DetachedTokenIsValid(first.Data[bootstrapapi.JWSSignatureKeyPrefix+tok.ID], kubeconfig, tok.ID, tok.Secret) {
		return nil, errors.New("failed to verify JWS signature of received cluster info object, can't trust this API Server")
	}
	server, ca, pin, err := clusterInfoServer([]byte(kubeconfig))
	if err != nil {
		return nil, err
	}
	if !slices.Contains(o.CACertHashes, pin) {
		return nil, fmt.Errorf("cluster CA found in %s ConfigMap is invalid: none of the public keys %q are pinned", bootstrapapi.ConfigMapClusterInfo, pin)
	}
	secure := &rest.Config{Host: o.Server, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	second, err := clusterInfo(ctx, secure, tok.ID)
	if err != nil {
		return nil, err
	}
	if second.Data[bootstrapapi.KubeConfigKey] != kubeconfig {
		return nil, fmt.Errorf("the second kubeconfig from the %s ConfigMap (using validated TLS) was different from the first", bootstrapapi.ConfigMapClusterInfo)
	}
	slog.Info("cluster-info signature and contents are valid and TLS certificate validates against pinned roots", "server", server)
	return &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, nil
}

// clusterInfo reads cluster-info anonymously until it carries a signature
// for the token, as kubeadm does.
func clusterInfo(ctx context.Context, cfg *rest.Config, tokenID string) (*corev1.ConfigMap, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	var cm *corev1.ConfigMap
	var last error
	err = wait.PollUntilContextTimeout(ctx, joinRetry, joinTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err = client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		switch {
		case err != nil:
			last = fmt.Errorf("failed to request the cluster-info ConfigMap: %w", err)
		case cm.Data[bootstrapapi.JWSSignatureKeyPrefix+tokenID] == "":
			last = fmt.Errorf("could not find a JWS signature in the cluster-info ConfigMap for token ID %q", tokenID)
		default:
			return true, nil
		}
		slog.Info("discovery: retrying", "server", cfg.Host, "err", last)
		return false, nil
	})
	if err != nil {
		return nil, errors.Join(err, last)
	}
	return cm, nil
}

// bootstrapClientCertificate is the kubelet's TLS bootstrap: a new key, a
// CSR for system:node:<name> in system:nodes to the kubelet client signer
// made with the token, and the certificate once it is issued.
func bootstrapClientCertificate(ctx context.Context, cluster *rest.Config, token, name string) (pki.Pair, error) {
	cfg := rest.CopyConfig(cluster)
	cfg.BearerToken = token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("bootstrap client: %w", err)
	}
	return requestNodeCertificate(ctx, client, name)
}

// requestNodeCertificate asks through client for the client certificate
// of node name, with a key of its own, and waits until it is issued.
func requestNodeCertificate(ctx context.Context, client kubernetes.Interface, name string) (pki.Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("generate the node's key: %w", err)
	}
	subject := &pkix.Name{CommonName: "system:node:" + name, Organization: []string{nodeauthorizer.Group}}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("unable to generate certificate request: %w", err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	reqName, err := csrName(key.Public(), subject, usages)
	if err != nil {
		return pki.Pair{}, err
	}
	reqName, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, reqName, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	slog.Info("waiting for the client certificate to be issued", "csr", reqName)
	wctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(wctx, client, reqName, uid)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("CertificateSigningRequest %s: %w", reqName, err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return pki.Pair{}, fmt.Errorf("encode the node's key: %w", err)
	}
	return pki.Pair{CertPEM: certPEM, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})}, nil
}

// csrName is the kubelet's name of its CSR, "node-csr-" and a digest of
// the public key, the subject and the usages, so that one request made
// again has the same name.
func csrName(pub crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	h := sha512.New512_256()
	enc := base64.RawURLEncoding.EncodeToString
	write := func(b []byte) {
		h.Write([]byte(enc(b)))
		h.Write([]byte{'|'})
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode the node's public key: %w", err)
	}
	write(der)
	write([]byte(subject.CommonName))
	for _, o := range subject.Organization {
		write([]byte(o))
	}
	for _, u := range usages {
		write([]byte(u))
	}
	return "node-csr-" + enc(h.Sum(nil)), nil
}
