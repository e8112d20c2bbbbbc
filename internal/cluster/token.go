package cluster

// svcnet token: bootstrap tokens as kubeadm token creates, lists and
// deletes them, and the join command a node runs with one.

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/pki"
)

// TokenOptions are kubeadm token create's.
type TokenOptions struct {
	// Token is "<id>.<secret>"; empty generates one.
	Token       string
	TTL         time.Duration
	Description string
	Usages      []string
	Groups      []string
}

// CreateToken writes the token's Secret (replacing one of the same ID, as
// kubeadm does) and returns the token.
func CreateToken(ctx context.Context, client kubernetes.Interface, o TokenOptions) (bootstraptoken.Token, error) {
	t, err := bootstraptoken.Parse(o.Token)
	if err != nil {
		return t, err
	}
	t.Description, t.Usages, t.Groups = o.Description, o.Usages, o.Groups
	if o.TTL > 0 {
		t.Expires = time.Now().Add(o.TTL)
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	secrets := client.CoreV1().Secrets(metav1.NamespaceSystem)
	s := t.SecretObject()
	_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return t, fmt.Errorf("failed to create or update bootstrap token with name %s: %w", s.Name, err)
	}
	return t, nil
}

// ListTokens prints the bootstrap tokens as kubeadm token list does;
// Secrets that hold no valid token are reported to errW.
func ListTokens(ctx context.Context, client kubernetes.Interface, out, errW io.Writer) error {
	list, err := client.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String()})
	if err != nil {
		return fmt.Errorf("failed to list bootstrap tokens: %w", err)
	}
	w := tabwriter.NewWriter(out, 10, 4, 3, ' ', 0)
	fmt.Fprintln(w, "TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS")
	for i := range list.Items {
		t, err := bootstraptoken.FromSecret(&list.Items[i])
		if err != nil {
			fmt.Fprintln(errW, err)
			continue
		}
		ttl, expires := "<forever>", "<never>"
		if !t.Expires.IsZero() {
			ttl, expires = duration.ShortHumanDuration(time.Until(t.Expires)), t.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%-9s\t%s\t%-22s\t%-56s\t%s\n", t, ttl, expires, orNone(strings.Join(t.Usages, ",")),
			orNone(t.Description), orNone(strings.Join(t.Groups, ",")))
	}
	return w.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// DeleteTokens deletes the tokens named by ID or whole, as kubeadm token
// delete.
func DeleteTokens(ctx context.Context, client kubernetes.Interface, out io.Writer, tokens []string) error {
	for _, s := range tokens {
		id := s
		if !bootstraputil.IsValidBootstrapTokenID(s) {
			t, err := bootstraptoken.Parse(s)
			if s == "" || err != nil {
				return fmt.Errorf("given token didn't match pattern %q or %q", bootstrapapi.BootstrapTokenPattern, bootstrapapi.BootstrapTokenIDPattern)
			}
			id = t.ID
		}
		err := client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, bootstraputil.BootstrapTokenSecretName(id), metav1.DeleteOptions{})
		if err != nil {
			return fmt.Errorf("failed to delete bootstrap token %q: %w", id, err)
		}
		fmt.Fprintf(out, "bootstrap token %q deleted\n", id)
	}
	return nil
}

// JoinCommand is the svcnet node command line that joins a node with t:
// the server and the CA pin are cluster-info's, what the node will check.
func JoinCommand(ctx context.Context, client kubernetes.Interface, t bootstraptoken.Token) (string, error) {
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the cluster-info ConfigMap: %w", err)
	}
	server, _, pin, err := clusterInfoServer([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("svcnet node --server %s --token %s --discovery-token-ca-cert-hash %s", server, t, pin), nil
}

// clusterInfoServer is the server URL and the CA of cluster-info's
// kubeconfig, and the pin of its (first) CA certificate.
func clusterInfoServer(kubeconfig []byte) (server string, ca []byte, pin string, err error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", nil, "", fmt.Errorf("couldn't parse the kubeconfig file in the %s ConfigMap: %w", bootstrapapi.ConfigMapClusterInfo, err)
	}
	if len(cfg.Clusters) != 1 {
		return "", nil, "", fmt.Errorf("malformed kubeconfig in the %s ConfigMap: want one cluster, have %d", bootstrapapi.ConfigMapClusterInfo, len(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		certs, err := certutil.ParseCertsPEM(c.CertificateAuthorityData)
		if err != nil {
			return "", nil, "", fmt.Errorf("failed to parse cluster CA from the %s ConfigMap: %w", bootstrapapi.ConfigMapClusterInfo, err)
		}
		if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
			return "", nil, "", fmt.Errorf("malformed server %q in the %s ConfigMap", c.Server, bootstrapapi.ConfigMapClusterInfo)
		}
		server, ca, pin = c.Server, c.CertificateAuthorityData, pki.PublicKeyPin(certs[0])
	}
	return server, ca, pin, nil
}
