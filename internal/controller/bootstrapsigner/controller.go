// Package bootstrapsigner is upstream's bootstrap-signer-controller
// (kube-controller-manager's pkg/controller/bootstrap): it keeps, in the
// ConfigMap kube-public/cluster-info, one key jws-kubeconfig-<id> per
// bootstrap token of kube-system marked usage-bootstrap-signing=true and
// not expired, holding the detached JWS (HS256, keyed by the token's
// secret) of the ConfigMap's kubeconfig key. A joining node that knows a
// token checks with it that the cluster-info it read anonymously is the
// cluster's. Signatures of tokens gone, expired or no longer for signing
// are removed. Upstream disables it by default; kubeadm (and svcnet up)
// enable it.
package bootstrapsigner

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "bootstrap-signer-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "bootstrapsigner"
	// ServiceAccount is its identity with --use-service-account-credentials.
	ServiceAccount = "bootstrap-signer"
	queueName      = "bootstrap_signer_queue"
	// key is the one thing to sync: the cluster-info ConfigMap.
	key = metav1.NamespacePublic + "/" + bootstrapapi.ConfigMapClusterInfo
)

// Controller is the bootstrap signer.
type Controller struct {
	client     kubernetes.Interface
	secrets    corelisters.SecretLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      *controller.Queue[string]
	now        func() time.Time
}

// New creates the controller and registers its handlers: a change of
// cluster-info, and any change of a bootstrap token Secret of kube-system,
// bring cluster-info to a sync.
func New(d controller.Deps) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{client: d.Client, secrets: core.Secrets().Lister(), configMaps: core.ConfigMaps().Lister(), now: time.Now}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	poke := func(any) { c.queue.Add(key) }
	synced, err := informer.Register(
		informer.Handler{Informer: core.ConfigMaps().Informer(), Handler: cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool {
				cm, ok := informer.Object[*corev1.ConfigMap](obj)
				return ok && cm.Namespace == metav1.NamespacePublic && cm.Name == bootstrapapi.ConfigMapClusterInfo
			},
			Handler: cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }},
		}},
		informer.Handler{Informer: core.Secrets().Informer(), Handler: cache.FilteringResourceEventHandler{
			FilterFunc: func(obj any) bool {
				s, ok := informer.Object[*corev1.Secret](obj)
				return ok && s.Namespace == metav1.NamespaceSystem && s.Type == bootstrapapi.SecretTypeBootstrapToken
			},
			Handler: cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }, DeleteFunc: poke},
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("bootstrap signer: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the signatures until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, 1, c.synced...)
}

// sync writes the signatures cluster-info should have, if they differ.
func (c *Controller) sync(ctx context.Context, _ string) error {
	cm, err := c.configMaps.ConfigMaps(metav1.NamespacePublic).Get(bootstrapapi.ConfigMapClusterInfo)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ConfigMap %s: %w", key, err)
	}
	content, ok := cm.Data[bootstrapapi.KubeConfigKey]
	if !ok {
		slog.Debug("no kubeconfig key to sign", "controller", ControllerName, "configMap", key)
		return nil
	}
	want := maps.Clone(cm.Data)
	maps.DeleteFunc(want, func(k, _ string) bool { return strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) })
	tokens, err := c.signingTokens()
	if err != nil {
		return err
	}
	for id, secret := range tokens {
		sig, err := jws.ComputeDetachedSignature(content, id, secret)
		if err != nil {
			return fmt.Errorf("sign %s with token %s: %w", key, id, err)
		}
		want[bootstrapapi.JWSSignatureKeyPrefix+id] = sig
	}
	if maps.Equal(want, cm.Data) {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	_, err = c.client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: update ConfigMap %s: %w", controller.ErrStale, key, err)
	}
	return fmt.Errorf("update ConfigMap %s: %w", key, err)
}

// signingTokens are the secrets of the tokens to sign with, by ID: those
// whose Secret is named after its token-id, holds a secret, has not
// expired and is marked for signing.
func (c *Controller) signingTokens() (map[string]string, error) {
	secrets, err := c.secrets.Secrets(metav1.NamespaceSystem).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list bootstrap token secrets: %w", err)
	}
	out := map[string]string{}
	now := c.now()
	for _, s := range secrets {
		if s.Type != bootstrapapi.SecretTypeBootstrapToken {
			continue
		}
		nameID, ok := bootstrapsecretutil.ParseName(s.Name)
		id := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenIDKey)
		secret := bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenSecretKey)
		if !ok || id == "" || id != nameID || secret == "" || bootstrapsecretutil.HasExpired(s, now) ||
			bootstrapsecretutil.GetData(s, bootstrapapi.BootstrapTokenUsageSigningKey) != "true" {
			continue
		}
		out[id] = secret
	}
	return out, nil
}
