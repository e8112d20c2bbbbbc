// Package clusterroleaggregation is upstream's
// clusterrole-aggregation-controller (kube-controller-manager's
// pkg/controller/clusterroleaggregation): the rules of every ClusterRole
// with an aggregationRule are the union of the rules of the other
// ClusterRoles its selectors match. For each selector in turn the matched
// ClusterRoles are taken in name order, the aggregating one itself left
// out, and each of their rules is added unless an equal one is there
// already. When the union differs from the rules the ClusterRole has, the
// controller applies it (server-side apply of rules, forced, as field
// manager clusterrole-aggregation-controller, as upstream: it owns the
// rules and takes them over from whoever wrote them). Since which
// ClusterRoles a selector matches can change with any ClusterRole, every
// change to one queues every aggregating ClusterRole, as upstream's.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacv1apply "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name and the field manager of
	// the aggregated rules.
	ControllerName = "clusterrole-aggregation-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "clusterrole-aggregation"
	// queueName labels the queue's metrics, as upstream's.
	queueName = "ClusterRoleAggregator"
	// workers is how many ClusterRoles are aggregated at once, upstream's
	// fixed 5.
	workers = 5
)

// Controller is the ClusterRole aggregation controller.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	synced []cache.InformerSynced
	queue  *controller.Queue[string]
}

// New creates the controller and registers its informer handler.
func New(d controller.Deps) (*Controller, error) {
	roles := d.Informers.Rbac().V1().ClusterRoles()
	c := &Controller{client: d.Client, roles: roles.Lister()}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: queueName, Sync: c.sync})
	enqueue := func(any) { c.enqueueAggregating() }
	synced, err := informer.Handle(roles.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, cur any) { enqueue(cur) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("clusterrole aggregation controller: %w", err)
	}
	c.synced = []cache.InformerSynced{synced}
	return c, nil
}

// Run keeps the aggregated ClusterRoles until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	c.queue.Run(ctx, workers, c.synced...)
}

// enqueueAggregating queues every ClusterRole with an aggregationRule:
// as upstream says, the ClusterRoles are few and which one feeds which is
// not known, so all are looked at again, each key retried on its own.
func (c *Controller) enqueueAggregating() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		slog.Error("listing ClusterRoles", "controller", ControllerName, "err", err)
		return
	}
	for _, cr := range all {
		if cr.AggregationRule != nil {
			c.queue.Add(cr.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	cr, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ClusterRole %s: %w", name, err)
	}
	if cr.AggregationRule == nil {
		return nil
	}
	rules, err := c.union(cr)
	if err != nil {
		return err
	}
	// Semantic equality: no rules and an empty list are the same.
	if apiequality.Semantic.DeepEqual(rules, cr.Rules) {
		return nil
	}
	return c.apply(ctx, name, rules)
}

// union is the rules of the ClusterRoles cr's selectors match: selector
// by selector, the ClusterRoles in name order without cr itself, each
// rule once, in the order first seen.
func (c *Controller) union(cr *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	for i := range cr.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&cr.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("selector %d of ClusterRole %s: %w", i, cr.Name, err)
		}
		matched, err := c.roles.List(selector)
		if err != nil {
			return nil, fmt.Errorf("list ClusterRoles: %w", err)
		}
		slices.SortFunc(matched, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
		for _, source := range matched {
			if source.Name == cr.Name {
				continue
			}
			for _, rule := range source.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return apiequality.Semantic.DeepEqual(have, rule) }) {
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules, nil
}

// apply writes rules as upstream does: a forced server-side apply of the
// ClusterRole's rules alone. Apply needs no read-modify-write, so there
// is no conflict to retry; an empty union applies no rules, which drops
// those the controller owned.
func (c *Controller) apply(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	cfg := rbacv1apply.ClusterRole(name)
	for _, r := range rules {
		rule := rbacv1apply.PolicyRule()
		rule.Verbs = r.Verbs
		rule.APIGroups = r.APIGroups
		rule.Resources = r.Resources
		rule.ResourceNames = r.ResourceNames
		rule.NonResourceURLs = r.NonResourceURLs
		cfg.WithRules(rule)
	}
	if _, err := c.client.RbacV1().ClusterRoles().Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: ControllerName, Force: true}); err != nil {
		return fmt.Errorf("apply rules of ClusterRole %s: %w", name, err)
	}
	slog.Debug("aggregated ClusterRole", "controller", ControllerName, "clusterRole", name, "rules", len(rules))
	return nil
}
