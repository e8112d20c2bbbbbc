// Package serviceaccount is upstream's serviceaccount-controller
// (kube-controller-manager's pkg/controller/serviceaccount): it keeps a
// ServiceAccount named "default" in every active namespace. A new
// namespace gets one at once (pods cannot be created in a namespace
// without it), and one deleted is created anew; a namespace that is
// terminating, or gone, is left alone. As upstream, the controller does
// nothing else: it makes no token Secrets and never changes a
// ServiceAccount that exists.
package serviceaccount

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

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "serviceaccount-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "serviceaccount"
	// DefaultName is the ServiceAccount every namespace gets.
	DefaultName = "default"
	// queueName labels the queue's metrics, as upstream's.
	queueName = "serviceaccount"
	// workers is how many namespaces are synced at once. Upstream runs
	// one; a few more keep one slow create from holding up the other
	// new namespaces, whose pods wait for their ServiceAccount.
	workers = 5
)

// Controller is the ServiceAccount controller.
type Controller struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	accounts   corelisters.ServiceAccountLister
	synced     []cache.InformerSynced
	queue      *controller.Queue[string]
}

// New creates the controller and registers its informer handlers: a
// namespace's creation or change, and a ServiceAccount's deletion, bring
// the namespace to a sync.
func New(d controller.Deps) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{
		client:     d.Client,
		namespaces: core.Namespaces().Lister(),
		accounts:   core.ServiceAccounts().Lister(),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	synced, err := informer.Register(
		informer.Handler{Informer: core.ServiceAccounts().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			DeleteFunc: c.onServiceAccountDelete,
		}},
		informer.Handler{Informer: core.Namespaces().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onNamespace,
			UpdateFunc: func(_, cur any) { c.onNamespace(cur) },
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("service account controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the default ServiceAccounts until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, workers, c.synced...)
}

func (c *Controller) onNamespace(obj any) {
	if ns, ok := informer.Object[*corev1.Namespace](obj); ok {
		c.queue.Add(ns.Name)
	}
}

func (c *Controller) onServiceAccountDelete(obj any) {
	if sa, ok := informer.Object[*corev1.ServiceAccount](obj); ok {
		c.queue.Add(sa.Namespace)
	}
}

// sync creates the default ServiceAccount of an active namespace that
// lacks it.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	start := time.Now()
	defer func() {
		slog.Debug("Finished syncing namespace", "controller", ControllerName, "namespace", namespace, "duration", time.Since(start))
	}()
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		// Nothing is created in a namespace being deleted.
		return nil
	}
	switch _, err := c.accounts.ServiceAccounts(namespace).Get(DefaultName); {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get ServiceAccount %s/%s: %w", namespace, DefaultName, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultName, Namespace: namespace}}
	_, err = c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case err == nil:
		slog.Debug("created ServiceAccount", "controller", ControllerName, "namespace", namespace, "name", DefaultName)
		return nil
	case apierrors.IsAlreadyExists(err),
		// The namespace began terminating, or went, since the cache saw it.
		apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), apierrors.IsNotFound(err):
		return nil
	}
	return fmt.Errorf("create ServiceAccount %s/%s: %w", namespace, DefaultName, err)
}
