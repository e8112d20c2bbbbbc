package service

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/allocator"
)

// single and dual are strategies of a single-stack and a dual-stack
// cluster.
var (
	single = testStrategy("10.96.0.0/12")
	dual   = testStrategy("10.96.0.0/12,fd00:10:96::/112")
)

func testStrategy(cidrs string) strategy {
	cfg, err := allocator.ParseConfig(cidrs, "30000-32767")
	if err != nil {
		panic(err)
	}
	return strategy{cfg: cfg}
}

func newService(mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func defaulted(s *corev1.Service) *corev1.Service {
	st := single
	st.Default(s)
	st.PrepareForCreate(s)
	return s
}

func TestDefaults(t *testing.T) {
	plain := defaulted(newService(func(s *corev1.Service) { s.Spec.Type = "" }))
	lb := defaulted(newService(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.Ports[0].TargetPort = intstr.FromString("http")
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	}))
	ext := defaulted(newService(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeExternalName
		s.Spec.ExternalName = "example.com"
	}))
	checks := []struct {
		name      string
		got, want interface{}
	}{
		{"type", plain.Spec.Type, corev1.ServiceTypeClusterIP},
		{"sessionAffinity", plain.Spec.SessionAffinity, corev1.ServiceAffinityNone},
		{"protocol", plain.Spec.Ports[0].Protocol, corev1.ProtocolTCP},
		{"targetPort", plain.Spec.Ports[0].TargetPort, intstr.FromInt32(80)},
		{"internalTrafficPolicy", *plain.Spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster},
		{"externalTrafficPolicy on ClusterIP", plain.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicy("")},
		{"allocateLoadBalancerNodePorts on ClusterIP", plain.Spec.AllocateLoadBalancerNodePorts == nil, true},
		{"named targetPort kept", lb.Spec.Ports[0].TargetPort, intstr.FromString("http")},
		{"externalTrafficPolicy on LoadBalancer", lb.Spec.ExternalTrafficPolicy, corev1.ServiceExternalTrafficPolicyCluster},
		{"allocateLoadBalancerNodePorts", *lb.Spec.AllocateLoadBalancerNodePorts, true},
		{"ClientIP timeout", *lb.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, int32(10800)},
		{"ipMode", *lb.Status.LoadBalancer.Ingress[0].IPMode, corev1.LoadBalancerIPModeVIP},
		{"ExternalName internalTrafficPolicy", ext.Spec.InternalTrafficPolicy == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	headless := defaulted(newService(func(s *corev1.Service) { s.Spec.ClusterIP = "None" }))
	if len(headless.Spec.ClusterIPs) != 1 || headless.Spec.ClusterIPs[0] != "None" {
		t.Errorf("clusterIPs = %v, want [None]", headless.Spec.ClusterIPs)
	}
	for _, s := range []*corev1.Service{plain, lb, ext, headless} {
		if errs := single.Validate(s); len(errs) != 0 {
			t.Errorf("defaulted %s service does not validate: %v", s.Spec.Type, errs)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{"no ports", func(s *corev1.Service) { s.Spec.Ports = nil }, []string{"spec.ports: Required value"}},
		{"headless without ports", func(s *corev1.Service) { s.Spec.Ports = nil; s.Spec.ClusterIP = "None" }, nil},
		{"port out of range", func(s *corev1.Service) { s.Spec.Ports[0].Port = 70000 },
			[]string{"spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
				"spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"bad protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" },
			[]string{`spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`}},
		{"unnamed ports", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Port: 80}, {Name: "https", Port: 443}}
		}, []string{"spec.ports[0].name: Required value"}},
		{"duplicate port names", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "http", Port: 8080}}
		}, []string{`spec.ports[1].name: Duplicate value: "http"`}},
		{"bad port name", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "HTTP", Port: 80}}
		}, []string{`spec.ports[0].name: Invalid value: "HTTP": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{"duplicate port", func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80}}
		}, []string{`spec.ports[1]: Duplicate value: {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}`}},
		{"bad type", func(s *corev1.Service) { s.Spec.Type = "Magic" },
			[]string{`spec.type: Unsupported value: "Magic": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}},
		{"node port on ClusterIP", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 },
			[]string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"}},
		{"headless NodePort", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort; s.Spec.ClusterIP = "None" },
			[]string{`spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for NodePort services`}},
		{"ExternalName without name", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName },
			[]string{"spec.externalName: Required value"}},
		{"local policy on ClusterIP", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal },
			[]string{`spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services`}},
		{"loopback external IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} },
			[]string{`spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{"affinity timeout", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(90000))}}
		}, []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 90000: must be greater than 0 and less than 86400"}},
		{"bad affinity", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			[]string{`spec.sessionAffinity: Unsupported value: "Cookie": supported values: "ClientIP", "None"`}},
		{"source ranges on ClusterIP", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} },
			[]string{"spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range single.Validate(defaulted(newService(tt.mutate))) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestHealthCheckNodePortImmutable(t *testing.T) {
	old := defaulted(newService(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 31000
	}))
	updated := old.DeepCopy()
	updated.Spec.HealthCheckNodePort = 31001
	errs := single.ValidateUpdate(updated, old)
	if len(errs) != 1 || errs[0].Error() != "spec.healthCheckNodePort: Forbidden: field is immutable" {
		t.Fatalf("got %v", errs)
	}
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name                         string
		svc                          *corev1.Service
		clusterIP, external, portStr string
	}{
		{"cluster IP", newService(func(s *corev1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.10"}
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: "UDP"}, {Name: "dns-tcp", Port: 53, Protocol: "TCP"}}
		}), "10.96.0.10", "<none>", "53/UDP,53/TCP"},
		{"no cluster IP yet", newService(func(s *corev1.Service) { s.Spec.Ports = nil }), "<none>", "<none>", "<none>"},
		{"node port", newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080, Protocol: "TCP"}, {Port: 443, NodePort: 30443, Protocol: "TCP"}}
			s.Spec.ExternalIPs = []string{"192.0.2.5", "192.0.2.6"}
		}), "<none>", "192.0.2.5,192.0.2.6", "80:30080/TCP,443:30443/TCP"},
		{"pending load balancer", newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 31234, Protocol: "TCP"}}
		}), "<none>", "<pending>", "80:31234/TCP"},
		{"load balancer", newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.Ports = []corev1.ServicePort{{Port: 80, Protocol: "TCP"}}
			s.Spec.ExternalIPs = []string{"198.51.100.1"}
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
				{IP: "192.0.2.20"}, {Hostname: "lb.example.com"}, {IP: "192.0.2.10"}, {IP: "192.0.2.20"}}
		}), "<none>", "192.0.2.10,192.0.2.20,lb.example.com,198.51.100.1", "80/TCP"},
		{"external name", newService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "db.example.com"
			s.Spec.Ports = nil
		}), "<none>", "db.example.com", "<none>"},
	}
	cols := columns()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []interface{}{cols[2].Cell(tt.svc), cols[3].Cell(tt.svc), cols[4].Cell(tt.svc)}
			want := []interface{}{tt.clusterIP, tt.external, tt.portStr}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s = %v, want %v", cols[i+2].Name, got[i], want[i])
				}
			}
		})
	}
	if got := cols[6].Cell(newService(nil)); got != "app=web" || cols[6].Priority != 1 {
		t.Errorf("selector = %v (priority %d)", got, cols[6].Priority)
	}
}
