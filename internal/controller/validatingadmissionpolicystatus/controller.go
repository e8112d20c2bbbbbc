// Package validatingadmissionpolicystatus is upstream's
// ValidatingAdmissionPolicy status controller
// (pkg/controller/validatingadmissionpolicystatus): each generation of a
// policy has its CEL expressions type-checked against the kinds it
// matches (and its paramKind), with k8s.io/apiserver's TypeChecker over
// the served OpenAPI schemas, and the warnings are applied to
// status.typeChecking with status.observedGeneration. The checks never
// change what the policy admits.
package validatingadmissionpolicystatus

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	apply "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	listers "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/openapi/generated"
)

// ControllerName is the controller's name, and its ServiceAccount's.
const ControllerName = "validatingadmissionpolicy-status-controller"

// Alias is the controller's name in --controllers.
const Alias = "validatingadmissionpolicy-status"

// fieldManager owns the status fields the controller applies, as
// upstream's.
const fieldManager = "validatingadmissionpolicy-status"

// workers are the policies checked at once (upstream's
// --concurrent-validating-admission-policy-status-syncs default).
const workers = 5

// Controller writes the policies' type checking status.
type Controller struct {
	d        controller.Deps
	policies listers.ValidatingAdmissionPolicyLister
	synced   cache.InformerSynced
	queue    *controller.Queue[string]
	checker  *validating.TypeChecker
}

// New creates the controller: the built-in kinds' schemas are svcnet's
// OpenAPI definitions, other kinds' (custom resources) are read through
// disco, whose resources also map the policies' rules to kinds.
func New(d controller.Deps, disco discovery.DiscoveryInterface, mapper meta.RESTMapper) (*Controller, error) {
	inf := d.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies()
	schemas := resolver.NewDefinitionsSchemaResolver(generated.GetOpenAPIDefinitions, scheme.Scheme).
		Combine(&resolver.ClientDiscoveryResolver{Discovery: disco})
	c := &Controller{d: d, policies: inf.Lister(),
		checker: &validating.TypeChecker{SchemaResolver: schemas, RestMapper: mapper}}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "validatingadmissionpolicy-status", Sync: c.sync})
	enqueue := func(obj any) {
		if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			c.queue.Add(p.Name)
		}
	}
	synced, err := informer.Handle(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur) },
	})
	if err != nil {
		return nil, fmt.Errorf("validating admission policy status controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run checks policies until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, workers, c.synced) }

// sync checks a policy's generation that has not been checked yet.
func (c *Controller) sync(ctx context.Context, name string) error {
	p, err := c.policies.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Generation <= p.Status.ObservedGeneration {
		return nil
	}
	warnings := []*apply.ExpressionWarningApplyConfiguration{}
	for _, w := range c.checker.Check(p) {
		warnings = append(warnings, apply.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := apply.ValidatingAdmissionPolicy(p.Name).WithStatus(apply.ValidatingAdmissionPolicyStatus().
		WithObservedGeneration(p.Generation).
		WithTypeChecking(apply.TypeChecking().WithExpressionWarnings(warnings...)))
	if _, err := c.d.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(ctx, status,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the status of policy %s: %w", name, err)
	}
	return nil
}
