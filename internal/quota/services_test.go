package quota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/utils/ptr"
)

func service(name string, typ corev1.ServiceType, nodePorts ...int32) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}},
	}
	for i, np := range nodePorts {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: []string{"http", "https", "metrics"}[i], Protocol: corev1.ProtocolTCP,
			Port: 80 + int32(i), TargetPort: intstr.FromInt32(8080 + int32(i)), NodePort: np,
		})
	}
	return svc
}

func TestServiceUsage(t *testing.T) {
	e := NewServiceEvaluator(nil)
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want corev1.ResourceList
	}{
		{"cluster IP", service("web", corev1.ServiceTypeClusterIP, 0, 0),
			rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		{"headless, no type", service("db", "", 0),
			rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		{"external name", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
			rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		{"node port, ports not yet allocated", service("web", corev1.ServiceTypeNodePort, 0, 0),
			rl("services", "1", "count/services", "1", "services.nodeports", "2", "services.loadbalancers", "0")},
		{"node port, three ports", service("web", corev1.ServiceTypeNodePort, 30080, 30443, 0),
			rl("services", "1", "count/services", "1", "services.nodeports", "3", "services.loadbalancers", "0")},
		{"load balancer", service("ingress", corev1.ServiceTypeLoadBalancer, 0, 0),
			rl("services", "1", "count/services", "1", "services.nodeports", "2", "services.loadbalancers", "1")},
		{"load balancer, node ports explicitly allocated", func() *corev1.Service {
			s := service("ingress", corev1.ServiceTypeLoadBalancer, 31080, 0)
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
			return s
		}(), rl("services", "1", "count/services", "1", "services.nodeports", "2", "services.loadbalancers", "1")},
		{"load balancer without node ports", func() *corev1.Service {
			s := service("ingress", corev1.ServiceTypeLoadBalancer, 0, 0)
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
			return s
		}(), rl("services", "1", "count/services", "1", "services.nodeports", "0", "services.loadbalancers", "1")},
		{"load balancer without node ports, one asked for", func() *corev1.Service {
			s := service("ingress", corev1.ServiceTypeLoadBalancer, 0, 31443, 0)
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
			return s
		}(), rl("services", "1", "count/services", "1", "services.nodeports", "1", "services.loadbalancers", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Usage(tc.svc)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "usage", got, tc.want)
			if err := e.Constraints([]corev1.ResourceName{"services", "services.nodeports"}, tc.svc); err != nil {
				t.Errorf("constraints: %v", err)
			}
		})
	}
	if _, err := e.Usage(webPod()); err == nil {
		t.Error("usage of a pod: no error")
	}
}

func TestServiceMatching(t *testing.T) {
	e := NewServiceEvaluator(nil)
	got := e.MatchingResources([]corev1.ResourceName{"services.loadbalancers", "pods", "count/services", "services", "requests.cpu", "services.nodeports", "count/services.v1"})
	want := []corev1.ResourceName{"count/services", "services", "services.loadbalancers", "services.nodeports"}
	if !equalNames(got, want) {
		t.Errorf("matching resources %v, want %v", got, want)
	}
	svc := service("web", corev1.ServiceTypeNodePort, 0)
	for _, tc := range []struct {
		name  string
		quota *corev1.ResourceQuota
		want  bool
	}{
		{"node port quota", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: rl("services.nodeports", "2")}}, true},
		{"pod quota", &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: rl("pods", "2")}}, false},
		// Services have no scopes: a scoped quota never matches them.
		{"scoped quota", &corev1.ResourceQuota{
			Spec:   corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}},
			Status: corev1.ResourceQuotaStatus{Hard: rl("services", "2")},
		}, false},
	} {
		got, err := e.Matches(tc.quota, svc)
		if err != nil || got != tc.want {
			t.Errorf("%s: matches %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	scopes, err := e.MatchingScopes(svc, []corev1.ScopedResourceSelectorRequirement{exists(corev1.ResourceQuotaScopeNotTerminating)})
	if err != nil || len(scopes) != 0 {
		t.Errorf("matching scopes %v, %v", scopes, err)
	}
}

func TestServiceHandles(t *testing.T) {
	e := NewServiceEvaluator(nil)
	svc := service("web", corev1.ServiceTypeClusterIP, 0)
	for _, tc := range []struct {
		name        string
		obj, old    runtime.Object
		subresource string
		op          admission.Operation
		want        bool
	}{
		{"create", svc, nil, "", admission.Create, true},
		{"update", svc, svc, "", admission.Update, true},
		{"delete", nil, svc, "", admission.Delete, false},
		{"status", svc, svc, "status", admission.Update, false},
		{"proxy", nil, nil, "proxy", admission.Connect, false},
	} {
		if got := e.Handles(attrs(tc.obj, tc.old, "services", tc.subresource, tc.op)); got != tc.want {
			t.Errorf("%s: handles %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestServiceUsageStats(t *testing.T) {
	lb := service("ingress", corev1.ServiceTypeLoadBalancer, 0, 0)
	f := listers(t, map[schema.GroupVersionResource][]runtime.Object{
		servicesResource: {
			service("web", corev1.ServiceTypeClusterIP, 0),
			service("api", corev1.ServiceTypeNodePort, 30080, 0, 0),
			lb,
			withNamespace(service("other", corev1.ServiceTypeLoadBalancer, 0), "team-b"),
		},
	})
	stats, err := NewServiceEvaluator(f).UsageStats(quotav1.UsageStatsOptions{
		Namespace: "team-a",
		Resources: []corev1.ResourceName{"services", "services.nodeports", "services.loadbalancers", "count/services"},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, "team-a", stats.Used, rl("services", "3", "count/services", "3", "services.nodeports", "5", "services.loadbalancers", "1"))
}

func withNamespace(svc *corev1.Service, ns string) *corev1.Service {
	svc.Namespace = ns
	return svc
}
