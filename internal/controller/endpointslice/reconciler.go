package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
)

// portGroup is the desired state of the pods whose ports resolve alike.
type portGroup struct {
	ports     []discoveryv1.EndpointPort
	endpoints endpointutil.EndpointSet
}

// reconcile writes the slices of svc so that they hold exactly the
// endpoints of pods, with as few writes as upstream's reconciler makes: a
// changed endpoint updates its own slice only, new endpoints fill slices
// that are written anyway, and a slice emptied while another is created is
// reused instead. wrote reports whether any write happened.
func (c *Controller) reconcile(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, trigger time.Time) (bool, error) {
	types := addressTypes(svc)
	byType := map[discoveryv1.AddressType][]*discoveryv1.EndpointSlice{}
	var all endpointutil.SliceWrites
	for _, s := range existing {
		if !types.Has(s.AddressType) {
			all.Delete = append(all.Delete, s) // a family the Service dropped
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	var errs []error
	for _, t := range sets.List(types) {
		ch, err := c.reconcileType(svc, pods, byType[t], t)
		errs = append(errs, err)
		all.Add(ch)
	}
	wrote, err := c.write(ctx, svc, all, trigger)
	return wrote, errors.Join(append(errs, err)...)
}

// reconcileType plans the slices of one address type. Pods on a node the
// cache does not know are left out, and reported as an error so that the
// Service is synced again, unless the Service publishes not-ready
// addresses.
func (c *Controller) reconcileType(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, addressType discoveryv1.AddressType) (endpointutil.SliceWrites, error) {
	var ch endpointutil.SliceWrites
	owned := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if endpointutil.OwnedBy(s, "Service", svc.UID) {
			key := endpointutil.PortsKey(s.Ports)
			owned[key] = append(owned[key], s)
		} else {
			ch.Delete = append(ch.Delete, s) // left by an earlier Service of this name
		}
	}

	desired := map[string]*portGroup{}
	var errs []error
	for _, pod := range pods {
		if !endpointutil.HasEndpoint(pod, true) {
			continue
		}
		ports := endpointPorts(svc, pod)
		key := endpointutil.PortsKey(ports)
		group := desired[key]
		if group == nil {
			group = &portGroup{ports: ports, endpoints: endpointutil.EndpointSet{}}
			desired[key] = group
		}
		node, err := c.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return endpointutil.SliceWrites{}, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
			}
			if !svc.Spec.PublishNotReadyAddresses {
				errs = append(errs, fmt.Errorf("skipping Pod %s for Service %s/%s: Node %s Not Found", pod.Name, svc.Namespace, svc.Name, pod.Spec.NodeName))
				continue
			}
			node = nil
		}
		if ep := podEndpoint(pod, node, svc, addressType); len(ep.Addresses) > 0 {
			group.endpoints.Insert(ep)
		}
	}

	for _, key := range slices.Sorted(maps.Keys(desired)) {
		group := desired[key]
		ch.Add(c.reconcilePorts(svc, owned[key], group, addressType))
	}
	for key, stale := range owned {
		if desired[key] == nil {
			ch.Delete = append(ch.Delete, stale...)
		}
	}

	// A Service always has at least one slice per address type, if only an
	// empty one, so that consumers can tell "no endpoints" from "not yet
	// processed".
	if len(ch.Create) == 0 && len(ch.Delete) == len(existing) {
		placeholder := newSlice(svc, []discoveryv1.EndpointPort{}, addressType)
		if len(ch.Delete) == 1 && samePlaceholder(ch.Delete[0], placeholder) {
			ch.Delete = nil
		} else {
			ch.Create = append(ch.Create, placeholder)
		}
	}
	return ch, errors.Join(errs...)
}

// reconcilePorts plans the slices of one port group: keep endpoints in the
// slice they are in, update slices whose endpoints changed, delete slices
// left empty, put new endpoints first into slices written anyway, then into
// the unchanged slice they fill best, then into new slices.
func (c *Controller) reconcilePorts(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, group *portGroup, addressType discoveryv1.AddressType) endpointutil.SliceWrites {
	var ch endpointutil.SliceWrites
	desired := group.endpoints
	var unchanged, updated []*discoveryv1.EndpointSlice
	existing = slices.Clone(existing)
	slices.SortFunc(existing, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range existing {
		var kept []discoveryv1.Endpoint
		changed := false
		for i := range s.Endpoints {
			key := endpointutil.EndpointKey(&s.Endpoints[i])
			want, ok := desired[key]
			if !ok {
				continue
			}
			kept = append(kept, *want)
			changed = changed || !endpointutil.SameEndpoint(want, &s.Endpoints[i])
			delete(desired, key)
		}
		labels, labelsChanged := sliceLabels(s, svc)
		switch {
		case changed || len(kept) != len(s.Endpoints):
			if len(kept) == 0 {
				ch.Delete = append(ch.Delete, s)
				continue
			}
			next := s.DeepCopy()
			next.Endpoints, next.Labels = kept, labels
			updated = append(updated, next)
		case labelsChanged:
			next := s.DeepCopy()
			next.Labels = labels
			updated = append(updated, next)
		default:
			unchanged = append(unchanged, s)
		}
	}

	remaining := desired.Sorted()
	fill := func(s *discoveryv1.EndpointSlice) {
		for len(remaining) > 0 && len(s.Endpoints) < c.opts.MaxEndpointsPerSlice {
			s.Endpoints = append(s.Endpoints, *remaining[0])
			remaining = remaining[1:]
		}
	}
	// Slices that are written anyway take new endpoints first, fullest
	// first.
	sort.SliceStable(updated, func(i, j int) bool { return len(updated[i].Endpoints) > len(updated[j].Endpoints) })
	for _, s := range updated {
		fill(s)
	}
	for len(remaining) > 0 {
		var target *discoveryv1.EndpointSlice
		if len(remaining) < c.opts.MaxEndpointsPerSlice {
			if i := bestFit(unchanged, len(remaining), c.opts.MaxEndpointsPerSlice); i >= 0 {
				target = unchanged[i].DeepCopy()
				unchanged = slices.Delete(unchanged, i, i+1)
				updated = append(updated, target)
			}
		}
		if target == nil {
			target = newSlice(svc, group.ports, addressType)
			ch.Create = append(ch.Create, target)
		}
		fill(target)
	}
	ch.Update = append(ch.Update, updated...)
	return ch
}

// bestFit is the index of the slice that n more endpoints would bring
// closest to full without overflowing, or -1.
func bestFit(candidates []*discoveryv1.EndpointSlice, n, limit int) int {
	best, bestRoom := -1, limit
	for i, s := range candidates {
		room := limit - len(s.Endpoints) - n
		if room >= 0 && room < bestRoom {
			best, bestRoom = i, room
		}
	}
	return best
}

// samePlaceholder says whether an existing slice already is the empty
// placeholder: same labels, owner and address type, no ports or endpoints.
func samePlaceholder(s, placeholder *discoveryv1.EndpointSlice) bool {
	return s.Namespace == placeholder.Namespace &&
		maps.Equal(s.Labels, placeholder.Labels) &&
		apiequality.Semantic.DeepEqual(s.OwnerReferences, placeholder.OwnerReferences) &&
		s.AddressType == placeholder.AddressType &&
		len(s.Endpoints) == 0 && len(s.Ports) == 0
}

// write applies the plan, reusing slices of this Service about to be
// deleted for slices about to be created.
func (c *Controller) write(ctx context.Context, svc *corev1.Service, plan endpointutil.SliceWrites, trigger time.Time) (bool, error) {
	plan.Reuse(func(s *discoveryv1.EndpointSlice) bool { return endpointutil.OwnedBy(s, "Service", svc.UID) })
	return endpointutil.Writer{
		Client:    c.client,
		Tracker:   c.tracker,
		Owner:     "Service " + svc.Namespace + "/" + svc.Name,
		NoCreates: svc.DeletionTimestamp != nil,
		Prepare:   func(s *discoveryv1.EndpointSlice) { setTrigger(s, trigger) },
	}.Apply(ctx, svc.Namespace, plan)
}

// setTrigger sets the last-change-trigger-time annotation of a slice about
// to be written.
func setTrigger(s *discoveryv1.EndpointSlice, trigger time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	endpointutil.SetTriggerTime(s.Annotations, trigger)
}
