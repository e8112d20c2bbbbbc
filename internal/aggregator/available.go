package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/endpoints"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"

	"github.com/svcnet/svcnet/internal/informer"
)

// discoveryTimeout bounds one discovery check, as upstream's client.
const discoveryTimeout = 5 * time.Second

// watch queues an APIService when it changes, and the APIServices naming
// a Service when the Service or its EndpointSlices change.
func (a *Aggregator) watch(af aggregatorinformers.SharedInformerFactory, kf informers.SharedInformerFactory) ([]cache.InformerSynced, error) {
	enqueue := func(obj any) {
		if s, ok := informer.Object[*apiregistrationv1.APIService](obj); ok {
			a.queue.Add(s.Name)
		}
	}
	byService := func(namespace, name string) {
		all, err := a.apiServices.List(labels.Everything())
		if err != nil {
			return
		}
		for _, s := range all {
			if svc := s.Spec.Service; svc != nil && svc.Namespace == namespace && svc.Name == name {
				a.queue.Add(s.Name)
			}
		}
	}
	onService := func(obj any) {
		if s, ok := informer.Object[*corev1.Service](obj); ok {
			byService(s.Namespace, s.Name)
		}
	}
	onSlice := func(obj any) {
		if s, ok := informer.Object[*discoveryv1.EndpointSlice](obj); ok && s.Labels[discoveryv1.LabelServiceName] != "" {
			byService(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
		}
	}
	handlers := func(f func(any)) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, cur any) { f(cur) }, DeleteFunc: f}
	}
	return informer.Register(
		informer.Handler{Informer: af.Apiregistration().V1().APIServices().Informer(), Handler: handlers(enqueue)},
		informer.Handler{Informer: kf.Core().V1().Services().Informer(), Handler: handlers(onService)},
		informer.Handler{Informer: kf.Discovery().V1().EndpointSlices().Informer(), Handler: handlers(onSlice)},
	)
}

// sync checks one APIService, as upstream's remote availability
// controller, and writes its Available condition when it changed.
func (a *Aggregator) sync(ctx context.Context, name string) error {
	orig, err := a.apiServices.Get(name)
	if apierrors.IsNotFound(err) {
		_, err = a.setBackend(name, nil, nil)
		return err
	}
	if err != nil {
		return err
	}
	// Without a Service it is the API server's own, which autoregister
	// keeps Available: the backend is forgotten.
	b, err := a.setBackend(name, &orig.Spec, nil)
	if err != nil || b == nil {
		return err
	}
	s := orig.DeepCopy()
	cond, listed, checkErr := a.check(ctx, s, b.transport)
	cond.Type, cond.LastTransitionTime = apiregistrationv1.Available, metav1.Now()
	v1helper.SetAPIServiceCondition(s, cond)
	if _, err := a.setBackend(name, &s.Spec, func(b *backend) {
		b.available = cond.Status == apiregistrationv1.ConditionTrue
		if listed.asked {
			b.fresh = listed.err == nil
			if b.fresh {
				b.resources = listed.resources
			}
		}
	}); err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(orig.Status, s.Status) {
		if old := v1helper.GetAPIServiceConditionByType(orig, apiregistrationv1.Available); old == nil || old.Status != cond.Status || old.Reason != cond.Reason {
			slog.Info("changing APIService availability", "name", name, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
		}
		if _, err := a.cfg.Client.ApiregistrationV1().APIServices().UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update the status of APIService %s: %w", name, err)
		}
	}
	// A failed discovery check is tried again soon, as upstream's.
	return checkErr
}

// listing is what a discovery check got: whether it asked the server, and
// its resources or its error.
type listing struct {
	asked     bool
	resources []apidiscoveryv2.APIResourceDiscovery
	err       error
}

// check judges an APIService with a Service, reaching it through rt: its
// condition (without type and time), the discovery check's listing, and
// that check's error, if it failed.
func (a *Aggregator) check(ctx context.Context, s *apiregistrationv1.APIService, rt *http.Transport) (apiregistrationv1.APIServiceCondition, listing, error) {
	ref := s.Spec.Service
	unavailable := func(reason, format string, args ...any) apiregistrationv1.APIServiceCondition {
		return apiregistrationv1.APIServiceCondition{Status: apiregistrationv1.ConditionFalse, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	svc, err := a.services.Services(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return unavailable("ServiceNotFound", "service/%s in %q is not present", ref.Name, ref.Namespace), listing{}, nil
	}
	if err != nil {
		return apiregistrationv1.APIServiceCondition{Status: apiregistrationv1.ConditionUnknown, Reason: "ServiceAccessError",
			Message: fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)}, listing{}, nil
	}
	if svc.Spec.Type == corev1.ServiceTypeClusterIP {
		i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return ref.Port != nil && p.Port == *ref.Port })
		if i < 0 {
			return unavailable("ServicePortError", "service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, *ref.Port), listing{}, nil
		}
		portName := svc.Spec.Ports[i].Name
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: ref.Name})
		list, err := a.slices.EndpointSlices(ref.Namespace).List(sel)
		if err != nil {
			return apiregistrationv1.APIServiceCondition{Status: apiregistrationv1.ConditionUnknown, Reason: "EndpointsAccessError",
				Message: fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)}, listing{}, nil
		}
		if len(list) == 0 {
			return unavailable("EndpointsNotFound", "cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace), listing{}, nil
		}
		if !slices.ContainsFunc(list, func(es *discoveryv1.EndpointSlice) bool { return servesPort(es, portName) }) {
			return unavailable("MissingEndpoints", "endpointslices for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, portName), listing{}, nil
		}
	}
	listed := discover(ctx, s, rt)
	if listed.err != nil {
		return unavailable("FailedDiscoveryCheck", "%v", listed.err), listed, listed.err
	}
	return apiregistrationv1.APIServiceCondition{Status: apiregistrationv1.ConditionTrue, Reason: "Passed", Message: "all checks passed"}, listed, nil
}

// servesPort reports whether a slice has a ready endpoint and the port
// named, as upstream's hasAvailableEndpoint.
func servesPort(es *discoveryv1.EndpointSlice, portName string) bool {
	return slices.ContainsFunc(es.Endpoints, func(e discoveryv1.Endpoint) bool { return e.Conditions.Ready == nil || *e.Conditions.Ready }) &&
		slices.ContainsFunc(es.Ports, func(p discoveryv1.EndpointPort) bool { return p.Name != nil && *p.Name == portName && p.Port != nil })
}

// discover asks the APIService's server, through rt, for its group
// version's resource list, as kube-aggregator's discovery check (as
// system:kube-aggregator in system:masters).
func discover(ctx context.Context, s *apiregistrationv1.APIService, rt *http.Transport) listing {
	u := url.URL{Scheme: "https", Host: serviceHost(s.Spec.Service), Path: "/apis/" + s.Spec.Group + "/" + s.Spec.Version}
	resources, err := fetchResources(ctx, rt, u.String())
	if err != nil {
		rt.CloseIdleConnections()
		return listing{asked: true, err: fmt.Errorf("failing or missing response from %s: %w", u.String(), err)}
	}
	return listing{asked: true, resources: resources}
}

// fetchResources GETs a group version's APIResourceList at u and converts
// it to aggregated discovery.
func fetchResources(ctx context.Context, rt http.RoundTripper, u string) ([]apidiscoveryv2.APIResourceDiscovery, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return nil, fmt.Errorf("bad status from %s: %d", u, resp.StatusCode)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode the resource list from %s: %w", u, err)
	}
	return endpoints.ConvertGroupVersionIntoToDiscovery(list.APIResources)
}
