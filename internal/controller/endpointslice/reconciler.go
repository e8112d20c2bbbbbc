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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
)

// changes are the writes one sync makes.
type changes struct {
	create, update, remove []*discoveryv1.EndpointSlice
}

func (c *changes) add(o changes) {
	c.create = append(c.create, o.create...)
	c.update = append(c.update, o.update...)
	c.remove = append(c.remove, o.remove...)
}

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
	var all changes
	for _, s := range existing {
		if !types.Has(s.AddressType) {
			all.remove = append(all.remove, s) // a family the Service dropped
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	var errs []error
	for _, t := range sets.List(types) {
		ch, err := c.reconcileType(svc, pods, byType[t], t)
		errs = append(errs, err)
		all.add(ch)
	}
	wrote, err := c.write(ctx, svc, all, trigger)
	return wrote, errors.Join(append(errs, err)...)
}

// reconcileType plans the slices of one address type. Pods on a node the
// cache does not know are left out, and reported as an error so that the
// Service is synced again, unless the Service publishes not-ready
// addresses.
func (c *Controller) reconcileType(svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice, addressType discoveryv1.AddressType) (changes, error) {
	var ch changes
	owned := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if endpointutil.OwnedBy(s, "Service", svc.UID) {
			key := endpointutil.PortsKey(s.Ports)
			owned[key] = append(owned[key], s)
		} else {
			ch.remove = append(ch.remove, s) // left by an earlier Service of this name
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
				return changes{}, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
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
		ch.add(c.reconcilePorts(svc, owned[key], group, addressType))
	}
	for key, stale := range owned {
		if desired[key] == nil {
			ch.remove = append(ch.remove, stale...)
		}
	}

	// A Service always has at least one slice per address type, if only an
	// empty one, so that consumers can tell "no endpoints" from "not yet
	// processed".
	if len(ch.create) == 0 && len(ch.remove) == len(existing) {
		placeholder := newSlice(svc, []discoveryv1.EndpointPort{}, addressType)
		if len(ch.remove) == 1 && samePlaceholder(ch.remove[0], placeholder) {
			ch.remove = nil
		} else {
			ch.create = append(ch.create, placeholder)
		}
	}
	return ch, errors.Join(errs...)
}

// reconcilePorts plans the slices of one port group: keep endpoints in the
// slice they are in, update slices whose endpoints changed, delete slices
// left empty, put new endpoints first into slices written anyway, then into
// the unchanged slice they fill best, then into new slices.
func (c *Controller) reconcilePorts(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, group *portGroup, addressType discoveryv1.AddressType) changes {
	var ch changes
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
				ch.remove = append(ch.remove, s)
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
			ch.create = append(ch.create, target)
		}
		fill(target)
	}
	ch.update = append(ch.update, updated...)
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

// write turns creates paired with deletes of the same address type into
// updates of the slice that would be deleted, then creates, updates and
// deletes. No slice is created for a Service being deleted (the garbage
// collector is removing its slices), nor in a terminating namespace.
func (c *Controller) write(ctx context.Context, svc *corev1.Service, ch changes, trigger time.Time) (bool, error) {
	var remove []*discoveryv1.EndpointSlice
	for _, s := range ch.remove {
		i := slices.IndexFunc(ch.create, func(n *discoveryv1.EndpointSlice) bool { return n.AddressType == s.AddressType })
		if i < 0 || !endpointutil.OwnedBy(s, "Service", svc.UID) {
			remove = append(remove, s)
			continue
		}
		reuse := ch.create[i]
		ch.create = slices.Delete(ch.create, i, i+1)
		reuse.Name, reuse.GenerateName, reuse.ResourceVersion = s.Name, "", s.ResourceVersion
		ch.update = append(ch.update, reuse)
	}
	api := c.client.DiscoveryV1().EndpointSlices(svc.Namespace)
	wrote := false
	if svc.DeletionTimestamp == nil {
		for _, s := range ch.create {
			setTrigger(s, trigger)
			created, err := api.Create(ctx, s, metav1.CreateOptions{})
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				return wrote, nil
			}
			if err != nil {
				return wrote, fmt.Errorf("failed to create EndpointSlice for Service %s/%s: %w", svc.Namespace, svc.Name, err)
			}
			wrote = true
			c.tracker.Written(created)
		}
	}
	for _, s := range ch.update {
		setTrigger(s, trigger)
		updated, err := api.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return wrote, fmt.Errorf("failed to update %s EndpointSlice for Service %s/%s: %w", s.Name, svc.Namespace, svc.Name, err)
		}
		wrote = true
		c.tracker.Written(updated)
	}
	for _, s := range remove {
		err := api.Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return wrote, fmt.Errorf("failed to delete %s EndpointSlice for Service %s/%s: %w", s.Name, svc.Namespace, svc.Name, err)
		}
		wrote = true
		c.tracker.Deleted(s)
	}
	return wrote, nil
}

// setTrigger sets the last-change-trigger-time annotation of a slice about
// to be written.
func setTrigger(s *discoveryv1.EndpointSlice, trigger time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	endpointutil.SetTriggerTime(s.Annotations, trigger)
}
