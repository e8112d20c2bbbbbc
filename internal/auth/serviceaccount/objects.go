package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Cached implements Objects from informer caches, asking the API when a
// cache lacks the object (one created a moment ago), as upstream's
// service account getter does.
type Cached struct {
	client          kubernetes.Interface
	serviceAccounts corelisters.ServiceAccountLister
	pods            corelisters.PodLister
	secrets         corelisters.SecretLister
	nodes           corelisters.NodeLister
}

// NewCached reads through the informers of factory, asking client on a
// miss.
func NewCached(client kubernetes.Interface, factory informers.SharedInformerFactory) *Cached {
	core := factory.Core().V1()
	return &Cached{client: client, serviceAccounts: core.ServiceAccounts().Lister(), pods: core.Pods().Lister(),
		secrets: core.Secrets().Lister(), nodes: core.Nodes().Lister()}
}

// cachedGet is lookup, or on a cache miss live.
func cachedGet[T any](lookup func() (T, error), live func() (T, error)) (T, error) {
	v, err := lookup()
	if apierrors.IsNotFound(err) {
		return live()
	}
	return v, err
}

// ServiceAccount implements Objects.
func (c *Cached) ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return cachedGet(func() (*corev1.ServiceAccount, error) { return c.serviceAccounts.ServiceAccounts(namespace).Get(name) },
		func() (*corev1.ServiceAccount, error) {
			return c.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

// Pod implements Objects.
func (c *Cached) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return cachedGet(func() (*corev1.Pod, error) { return c.pods.Pods(namespace).Get(name) },
		func() (*corev1.Pod, error) {
			return c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

// Secret implements Objects.
func (c *Cached) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return cachedGet(func() (*corev1.Secret, error) { return c.secrets.Secrets(namespace).Get(name) },
		func() (*corev1.Secret, error) {
			return c.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		})
}

// Node implements Objects.
func (c *Cached) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return cachedGet(func() (*corev1.Node, error) { return c.nodes.Get(name) },
		func() (*corev1.Node, error) { return c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}) })
}
