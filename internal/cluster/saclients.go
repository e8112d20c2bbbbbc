package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/controller/bootstrapsigner"
	"github.com/svcnet/svcnet/internal/controller/tokencleaner"
	"github.com/svcnet/svcnet/internal/controller/volume/persistentvolume"
	"github.com/svcnet/svcnet/internal/controller/volume/pvcprotection"
	"github.com/svcnet/svcnet/internal/controller/volume/pvprotection"
	"github.com/svcnet/svcnet/internal/volume/localpath"
)

// controllerServiceAccounts are the kube-system ServiceAccounts the
// controllers act as with --use-service-account-credentials, upstream's
// names, each bound by the default policy to system:controller:<name>.
var controllerServiceAccounts = map[string]string{
	"serviceaccount-controller":                      "service-account-controller",
	"attachdetach-controller":                        "attachdetach-controller",
	"root-ca-certificate-publisher-controller":       "root-ca-cert-publisher",
	"clusterrole-aggregation-controller":             "clusterrole-aggregation-controller",
	"endpoints-controller":                           "endpoint-controller",
	"endpointslice-controller":                       "endpointslice-controller",
	"endpointslice-mirroring-controller":             "endpointslicemirroring-controller",
	"garbage-collector-controller":                   "generic-garbage-collector",
	"namespace-controller":                           "namespace-controller",
	"service-cidr-controller":                        "service-cidrs-controller",
	"replicaset-controller":                          "replicaset-controller",
	"replicationcontroller-controller":               "replication-controller",
	"deployment-controller":                          "deployment-controller",
	"statefulset-controller":                         "statefulset-controller",
	"daemonset-controller":                           "daemon-set-controller",
	"disruption-controller":                          "disruption-controller",
	"horizontal-pod-autoscaler":                      "horizontal-pod-autoscaler",
	"job-controller":                                 "job-controller",
	"cronjob-controller":                             "cronjob-controller",
	"ttl-after-finished-controller":                  "ttl-after-finished-controller",
	"resourcequota-controller":                       "resourcequota-controller",
	"validatingadmissionpolicy-status-controller":    "validatingadmissionpolicy-status-controller",
	"node-lifecycle-controller":                      "node-controller",
	"taint-eviction-controller":                      "node-controller",
	"node-ipam-controller":                           "node-controller",
	"certificatesigningrequest-signing-controller":   "certificate-controller",
	"certificatesigningrequest-approving-controller": "certificate-controller",
	"certificatesigningrequest-cleaner-controller":   "certificate-controller",
	"metallb-controller":                             "metallb-controller",
	persistentvolume.ControllerName:                  "persistent-volume-binder",
	pvcprotection.ControllerName:                     "pvc-protection-controller",
	pvprotection.ControllerName:                      "pv-protection-controller",
	sharedPathProvisioner:                            localpath.ServiceAccount,
	bootstrapsigner.ControllerName:                   bootstrapsigner.ServiceAccount,
	tokencleaner.ControllerName:                      tokencleaner.ServiceAccount,
}

// saTokenExpiration is how long the controllers' tokens live, as
// upstream's controller client builder asks.
const saTokenExpiration = time.Hour

// serviceAccountConfig is cfg without its client certificate, acting as
// the kube-system ServiceAccount name with tokens that root asks for
// (creating the ServiceAccount first if need be), as upstream's
// DynamicControllerClientBuilder: a token is asked anew when 80% of its
// life has passed, or when the API server refuses it.
func serviceAccountConfig(cfg *rest.Config, root kubernetes.Interface, name string) *rest.Config {
	out := rest.AnonymousClientConfig(cfg)
	src := &saToken{root: root, name: name}
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &saBearer{rt: rt, src: src} }
	return out
}

type saToken struct {
	root kubernetes.Interface
	name string

	mu      sync.Mutex
	token   string
	refresh time.Time
}

// get is the current token, asked for when due.
func (t *saToken) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Now().Before(t.refresh) {
		return t.token, nil
	}
	sas := t.root.CoreV1().ServiceAccounts(metav1.NamespaceSystem)
	if _, err := sas.Get(ctx, t.name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: t.name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create service account kube-system/%s: %w", t.name, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("get service account kube-system/%s: %w", t.name, err)
	}
	secs := int64(saTokenExpiration / time.Second)
	tr, err := sas.CreateToken(ctx, t.name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of service account kube-system/%s: %w", t.name, err)
	}
	t.token = tr.Status.Token
	t.refresh = time.Now().Add(time.Until(tr.Status.ExpirationTimestamp.Time) * 8 / 10)
	return t.token, nil
}

// reset forgets a token the API server refused.
func (t *saToken) reset(token string) {
	t.mu.Lock()
	if t.token == token {
		t.token = ""
	}
	t.mu.Unlock()
}

// saBearer adds the service account's token to each request.
type saBearer struct {
	rt  http.RoundTripper
	src *saToken
}

func (b *saBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	token, err := b.src.get(r.Context())
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		b.src.reset(token)
	}
	return resp, err
}
