// Package rootcacertpublisher is upstream's
// root-ca-certificate-publisher-controller (kube-controller-manager's
// pkg/controller/certificates/rootcacertpublisher): it keeps a ConfigMap
// kube-root-ca.crt in every active namespace whose ca.crt is the cluster's
// CA bundle, the PEM that verifies the API server from inside a pod, and
// whose kubernetes.io/description annotation says so. As upstream, a
// namespace's creation brings the ConfigMap; when it is deleted it is
// created anew; when its data are changed (ca.crt, or a key added or
// removed) they are put back whole, and an annotation removed or emptied is
// put back (one changed to another text is kept, as upstream). Other
// metadata (labels, other annotations) and binaryData are left as they
// are. A terminating namespace is left alone.
package rootcacertpublisher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	certutil "k8s.io/client-go/util/cert"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "root-ca-certificate-publisher-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "root-ca-cert-publisher"
	// ConfigMapName is the ConfigMap every namespace gets.
	ConfigMapName = "kube-root-ca.crt"
	// DataKey is the key of the CA bundle in the ConfigMap's data.
	DataKey = "ca.crt"
	// DescriptionAnnotation is the annotation describing the ConfigMap.
	DescriptionAnnotation = "kubernetes.io/description"
	// Description is its value.
	Description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
	// queueName labels the queue's metrics, as upstream's.
	queueName = "root_ca_cert_publisher"
	// workers is how many namespaces are synced at once; upstream runs
	// one, and has no flag for it.
	workers = 5
)

// RootCA is the CA bundle to publish, as kube-controller-manager finds
// it: the PEM file of --root-ca-file when given (which must hold
// certificates), else the CA the controller manager's client trusts, its
// kubeconfig's certificate-authority-data or, failing that, the file its
// certificate-authority names. It is empty when the client trusts no CA
// of its own.
func RootCA(rootCAFile string, cfg *rest.Config) ([]byte, error) {
	if rootCAFile != "" {
		ca, err := os.ReadFile(rootCAFile)
		if err == nil {
			_, err = certutil.ParseCertsPEM(ca)
		}
		if err != nil {
			return nil, fmt.Errorf("error parsing root-ca-file at %s: %w", rootCAFile, err)
		}
		return ca, nil
	}
	if cfg == nil {
		return nil, nil
	}
	if len(cfg.TLSClientConfig.CAData) > 0 {
		return cfg.TLSClientConfig.CAData, nil
	}
	if f := cfg.TLSClientConfig.CAFile; f != "" {
		ca, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read the client's CA file: %w", err)
		}
		return ca, nil
	}
	return nil, nil
}

// Controller is the root CA certificate publisher.
type Controller struct {
	client     kubernetes.Interface
	rootCA     string
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	synced     []cache.InformerSynced
	queue      *controller.Queue[string]
}

// New creates the controller, which publishes rootCA (see RootCA), and
// registers its informer handlers: a namespace's creation or change, and
// a change or deletion of its kube-root-ca.crt, bring the namespace to a
// sync.
func New(d controller.Deps, rootCA []byte) (*Controller, error) {
	if len(rootCA) == 0 {
		slog.Warn("no root CA to publish: kube-root-ca.crt ConfigMaps get an empty ca.crt", "controller", ControllerName)
	}
	core := d.Informers.Core().V1()
	c := &Controller{
		client:     d.Client,
		rootCA:     string(rootCA),
		namespaces: core.Namespaces().Lister(),
		configMaps: core.ConfigMaps().Lister(),
	}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	synced, err := informer.Register(
		informer.Handler{Informer: core.ConfigMaps().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, cur any) { c.onConfigMap(cur) },
			DeleteFunc: c.onConfigMap,
		}},
		informer.Handler{Informer: core.Namespaces().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onNamespace,
			UpdateFunc: func(_, cur any) { c.onNamespace(cur) },
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("root CA certificate publisher: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the kube-root-ca.crt ConfigMaps until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, workers, c.synced...)
}

func (c *Controller) onNamespace(obj any) {
	if ns, ok := informer.Object[*corev1.Namespace](obj); ok && ns.Status.Phase == corev1.NamespaceActive {
		c.queue.Add(ns.Name)
	}
}

func (c *Controller) onConfigMap(obj any) {
	if cm, ok := informer.Object[*corev1.ConfigMap](obj); ok && cm.Name == ConfigMapName {
		c.queue.Add(cm.Namespace)
	}
}

// data is what the ConfigMap holds.
func (c *Controller) data() map[string]string {
	return map[string]string{DataKey: c.rootCA}
}

// sync creates or repairs the kube-root-ca.crt of an active namespace.
func (c *Controller) sync(ctx context.Context, namespace string) error {
	start := time.Now()
	defer func() {
		slog.Debug("Finished syncing namespace", "controller", ControllerName, "namespace", namespace, "elapsedTime", time.Since(start))
	}()
	ns, err := c.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		return nil
	}
	cm, err := c.configMaps.ConfigMaps(namespace).Get(ConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		return c.create(ctx, namespace)
	case err != nil:
		return fmt.Errorf("get ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	if maps.Equal(cm.Data, c.data()) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = c.data()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	_, err = c.client.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{})
	switch {
	case err == nil:
		slog.Debug("restored ConfigMap", "controller", ControllerName, "namespace", namespace, "name", ConfigMapName)
		return nil
	case apierrors.IsNotFound(err):
		// Deleted since the cache saw it: its deletion brings it back.
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: update ConfigMap %s/%s: %w", controller.ErrStale, namespace, ConfigMapName, err)
	}
	return fmt.Errorf("update ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
}

func (c *Controller) create(ctx context.Context, namespace string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ConfigMapName,
			Namespace:   namespace,
			Annotations: map[string]string{DescriptionAnnotation: Description},
		},
		Data: c.data(),
	}
	_, err := c.client.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case err == nil:
		slog.Debug("created ConfigMap", "controller", ControllerName, "namespace", namespace, "name", ConfigMapName)
		return nil
	case apierrors.IsNotFound(err), apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace went, or began terminating, since the cache saw it.
		return nil
	case apierrors.IsAlreadyExists(err):
		// The cache has yet to see it; the retry checks what it holds.
		return fmt.Errorf("%w: create ConfigMap %s/%s: %w", controller.ErrStale, namespace, ConfigMapName, err)
	}
	return fmt.Errorf("create ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
}
