// Package certificates is what the CertificateSigningRequest controllers
// that act on one request at a time share, upstream's
// pkg/controller/certificates CertificateController: every change of a
// request puts its name on a queue, and a request without a certificate
// yet goes, as a copy, to the controller's handler. A failing request is
// retried with upstream's backoff (200ms doubling to 1000s), for as long
// as it fails: an approval may wait on a binding made later.
package certificates

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Handler acts on a request that has no certificate; the request is the
// handler's to change. An error retries the request.
type Handler func(ctx context.Context, csr *capi.CertificateSigningRequest) error

// Controller feeds requests to a Handler.
type Controller struct {
	name    string
	workers int
	lister  certlisters.CertificateSigningRequestLister
	synced  []cache.InformerSynced
	queue   *controller.Queue[string]
	handle  Handler
}

// New registers the controller's handlers on the shared
// CertificateSigningRequest informer; name labels its queue and logs.
func New(d controller.Deps, name string, workers int, handle Handler) (*Controller, error) {
	csrs := d.Informers.Certificates().V1().CertificateSigningRequests()
	c := &Controller{name: name, workers: workers, lister: csrs.Lister(), handle: handle}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{
		Name: name,
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second),
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
		MaxRetries: math.MaxInt,
		Sync:       c.sync,
	})
	synced, err := informer.Register(informer.Handler{Informer: csrs.Informer(), Handler: cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.synced = synced
	return c, nil
}

// Run handles requests until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, c.workers, c.synced...)
}

func (c *Controller) enqueue(obj any) {
	if csr, ok := informer.Object[*capi.CertificateSigningRequest](obj); ok {
		c.queue.Add(csr.Name)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	csr, err := c.lister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get CertificateSigningRequest %s: %w", name, err)
	case len(csr.Status.Certificate) > 0:
		return nil
	}
	return c.handle(ctx, csr.DeepCopy())
}
