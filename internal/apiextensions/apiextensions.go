// Package apiextensions runs, inside the API server, what upstream's
// apiextensions-apiserver runs beside its custom resource handler: the
// naming and establishing controllers (upstream's own), the installer that
// serves each established CustomResourceDefinition's versions through the
// resource set, the OpenAPI publisher for custom resources (so that
// `kubectl explain` and client-side validation know them), and the
// finalizer that removes a deleted definition's objects before the
// definition itself goes.
package apiextensions

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	crdclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	crdlisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/establish"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/openapi"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/customresource"
	"github.com/svcnet/svcnet/internal/registry/customresourcedefinition"
)

// Controllers serve the custom resources of a cluster's definitions.
type Controllers struct {
	client    crdclient.Interface
	dynamic   dynamic.Interface
	factory   crdinformers.SharedInformerFactory
	lister    crdlisters.CustomResourceDefinitionLister
	synced    cache.InformerSynced
	resources *registry.Set
	openapi   *openapi.Service
	// converters make each definition's converter (None or Webhook).
	converters *conversion.CRConverterFactory
	naming     *status.NamingConditionController
	establish  *establish.EstablishingController
	queue      *controller.Queue[string]

	mu      sync.Mutex
	serving map[string]string // definition name -> what its resources were built from
	tried   map[string]bool   // definitions synced at least once
}

// New builds the controllers over the API server's loopback config; they
// add and remove resources of set and documents of oapi.
func New(config *rest.Config, set *registry.Set, oapi *openapi.Service, converters *conversion.CRConverterFactory, m *controller.Metrics) (*Controllers, error) {
	client, err := crdclient.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("apiextensions client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	factory := crdinformers.NewSharedInformerFactory(client, 0)
	crds := factory.Apiextensions().V1().CustomResourceDefinitions()
	c := &Controllers{
		client: client, dynamic: dyn, factory: factory, lister: crds.Lister(),
		resources: set, openapi: oapi, converters: converters, serving: map[string]string{}, tried: map[string]bool{},
		naming:    status.NewNamingConditionController(klog.Background(), crds, client.ApiextensionsV1()),
		establish: establish.NewEstablishingController(crds, client.ApiextensionsV1()),
	}
	c.queue = controller.NewQueue(m, controller.QueueConfig[string]{Name: "crd_installer", Sync: c.sync})
	enqueue := func(obj any) {
		if crd, ok := informer.Object[*apiextensionsv1.CustomResourceDefinition](obj); ok {
			c.queue.Add(crd.Name)
		}
	}
	c.synced, err = informer.Handle(crds.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("crd informer: %w", err)
	}
	return c, nil
}

// Run serves definitions until ctx ends.
func (c *Controllers) Run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	var wg sync.WaitGroup
	wg.Go(func() { c.naming.RunWithContext(ctx) })
	wg.Go(func() { c.establish.RunWithContext(ctx) })
	c.queue.Run(ctx, 1, c.synced)
	wg.Wait()
}

// HasSynced reports whether the definitions stored when the server
// started have been looked at, so that a restarted server serves their
// objects before it says it is ready.
func (c *Controllers) HasSynced() bool {
	if !c.synced() {
		return false
	}
	crds, err := c.lister.List(labels.Everything())
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, crd := range crds {
		if !c.tried[crd.Name] {
			return false
		}
	}
	return true
}

// sync serves, re-serves or stops serving one definition, and finalizes
// it once it is being deleted.
func (c *Controllers) sync(ctx context.Context, name string) error {
	defer func() {
		c.mu.Lock()
		c.tried[name] = true
		c.mu.Unlock()
	}()
	crd, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return c.serve(name, nil)
	}
	if err != nil {
		return err
	}
	deleting := crd.DeletionTimestamp != nil && slices.Contains(crd.Finalizers, customresourcedefinition.CleanupFinalizer)
	if !condition(crd, apiextensionsv1.Established) {
		if deleting {
			// Never served: nothing of it is stored.
			return c.release(ctx, crd, "NeverEstablished", "resource was never established")
		}
		if condition(crd, apiextensionsv1.NamesAccepted) {
			c.establish.QueueCRD(name, 0)
		}
		return nil
	}
	if err := c.serve(name, crd); err != nil {
		return err
	}
	if deleting {
		return c.finalize(ctx, crd)
	}
	return nil
}

// serve makes the set serve crd's versions under its accepted names (nil:
// none), and republishes the custom resources' OpenAPI documents.
func (c *Controllers) serve(name string, crd *apiextensionsv1.CustomResourceDefinition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var built string
	var rs []*registry.Resource
	if crd != nil {
		fp, err := json.Marshal([]any{crd.UID, crd.Generation, crd.Status.AcceptedNames, crd.DeletionTimestamp != nil})
		if err != nil {
			return err
		}
		built = string(fp)
		if c.serving[name] == built {
			return nil
		}
		served := crd.DeepCopy()
		served.Spec.Names = crd.Status.AcceptedNames
		if rs, err = customresource.Resources(served, c.openapi.StaticSchemas(), crd.DeletionTimestamp != nil, c.converters); err != nil {
			return err
		}
	} else if _, ok := c.serving[name]; !ok {
		return nil
	}
	if err := c.resources.Replace(name, rs...); err != nil {
		return err
	}
	if crd == nil {
		delete(c.serving, name)
	} else {
		c.serving[name] = built
	}
	slog.Info("custom resources served", "definition", name, "versions", len(rs))
	return c.publish()
}

// publish builds the OpenAPI documents of every established definition.
func (c *Controllers) publish() error {
	crds, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	var v2 []*spec.Swagger
	byGV := map[string][]*spec3.OpenAPI{}
	for _, crd := range crds {
		if _, ok := c.serving[crd.Name]; !ok {
			continue
		}
		served := crd.DeepCopy()
		served.Spec.Names = crd.Status.AcceptedNames
		for _, v := range served.Spec.Versions {
			if !v.Served {
				continue
			}
			s2, err := builder.BuildOpenAPIV2(served, v.Name, builder.Options{V2: true, IncludeSelectableFields: true})
			if err != nil {
				return fmt.Errorf("openapi v2 of %s/%s: %w", crd.Name, v.Name, err)
			}
			v2 = append(v2, s2)
			s3, err := builder.BuildOpenAPIV3(served, v.Name, builder.Options{IncludeSelectableFields: true})
			if err != nil {
				return fmt.Errorf("openapi v3 of %s/%s: %w", crd.Name, v.Name, err)
			}
			key := "apis/" + crd.Spec.Group + "/" + v.Name
			byGV[key] = append(byGV[key], s3)
		}
	}
	v3 := map[string]*spec3.OpenAPI{}
	for key, docs := range byGV {
		merged, err := builder.MergeSpecsV3(docs...)
		if err != nil {
			return fmt.Errorf("openapi v3 of %s: %w", key, err)
		}
		v3[key] = merged
	}
	return c.openapi.SetCustomResources(v2, v3)
}

func condition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// finalizeRetry is how soon a definition whose objects are still going
// is looked at again.
const finalizeRetry = time.Second
