// Package tokencleaner is upstream's token-cleaner-controller
// (kube-controller-manager's pkg/controller/bootstrap): it deletes each
// bootstrap token Secret of kube-system once its expiration has passed (an
// unreadable expiration counts as passed), and looks again at a token not
// yet expired when it is due. Upstream disables it by default; kubeadm
// (and svcnet up) enable it.
package tokencleaner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "token-cleaner-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "tokencleaner"
	// ServiceAccount is its identity with --use-service-account-credentials.
	ServiceAccount = "token-cleaner"
	queueName      = "token_cleaner"
)

// Controller is the token cleaner.
type Controller struct {
	client  kubernetes.Interface
	secrets corelisters.SecretLister
	synced  []cache.InformerSynced
	queue   *controller.Queue[string]
	now     func() time.Time
}

// New creates the controller and registers its handler on the Secrets
// informer: bootstrap token Secrets of kube-system come to a sync when
// they are added or change.
func New(d controller.Deps) (*Controller, error) {
	secrets := d.Informers.Core().V1().Secrets()
	c := &Controller{client: d.Client, secrets: secrets.Lister(), now: time.Now}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	synced, err := informer.Register(informer.Handler{Informer: secrets.Informer(), Handler: cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s, ok := informer.Object[*corev1.Secret](obj)
			return ok && s.Type == bootstrapapi.SecretTypeBootstrapToken && s.Namespace == metav1.NamespaceSystem
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueue,
			UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		},
	}})
	if err != nil {
		return nil, fmt.Errorf("token cleaner: %w", err)
	}
	c.synced = synced
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, ok := informer.Key(obj); ok {
		c.queue.Add(key)
	}
}

// Run cleans expired tokens until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, 1, c.synced...)
}

// sync deletes the Secret of key if its token has expired, or looks again
// when it will have.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	s, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get secret %s: %w", key, err)
	}
	if s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return nil
	}
	ttl, expired := bootstrapsecretutil.GetExpiration(s, c.now())
	if !expired {
		if ttl > 0 {
			c.queue.AddAfter(key, ttl)
		}
		return nil
	}
	// The UID precondition spares a Secret made anew under the same name.
	opts := metav1.DeleteOptions{}
	if s.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &s.UID}
	}
	err = c.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete expired bootstrap token secret %s: %w", key, err)
	}
	if err == nil {
		slog.Info("deleted expired bootstrap token", "controller", ControllerName, "secret", key)
	}
	return nil
}
