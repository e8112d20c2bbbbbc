package service

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// create runs the create path of st up to validation.
func create(st strategy, mutate func(*corev1.Service)) (*corev1.Service, []string) {
	s := newService(mutate)
	st.Default(s)
	st.PrepareForCreate(s)
	var errs []string
	for _, e := range st.Validate(s) {
		errs = append(errs, e.Error())
	}
	return s, errs
}

// update runs the update path of st from old up to validation.
func update(st strategy, old *corev1.Service, mutate func(*corev1.Service)) (*corev1.Service, []string) {
	s := old.DeepCopy()
	mutate(s)
	st.Default(s)
	st.PrepareForUpdate(s, old)
	var errs []string
	for _, e := range st.ValidateUpdate(s, old) {
		errs = append(errs, e.Error())
	}
	return s, errs
}

func TestIPFamilyDefaults(t *testing.T) {
	for _, tt := range []struct {
		name     string
		st       strategy
		mutate   func(*corev1.Service)
		policy   corev1.IPFamilyPolicy
		families string
	}{
		{"single-stack", single, nil, corev1.IPFamilyPolicySingleStack, "IPv4"},
		{"prefer dual on single-stack", single, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		}, corev1.IPFamilyPolicyPreferDualStack, "IPv4"},
		{"prefer dual on dual-stack", dual, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		}, corev1.IPFamilyPolicyPreferDualStack, "IPv4,IPv6"},
		{"IPv6 first", dual, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}, corev1.IPFamilyPolicyRequireDualStack, "IPv6,IPv4"},
		{"family from the cluster IP", dual, func(s *corev1.Service) {
			s.Spec.ClusterIP = "fd00:10:96::5"
		}, corev1.IPFamilyPolicySingleStack, "IPv6"},
		{"headless selectorless", single, func(s *corev1.Service) {
			s.Spec.ClusterIP = "None"
			s.Spec.Selector = nil
		}, corev1.IPFamilyPolicyRequireDualStack, "IPv4,IPv6"},
		{"headless with selector", dual, func(s *corev1.Service) { s.Spec.ClusterIP = "None" },
			corev1.IPFamilyPolicySingleStack, "IPv4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, errs := create(tt.st, tt.mutate)
			var fams []string
			for _, f := range s.Spec.IPFamilies {
				fams = append(fams, string(f))
			}
			if len(errs) > 0 || policyOf(s) != tt.policy || strings.Join(fams, ",") != tt.families {
				t.Errorf("policy %s families %v errors %v, want %s %s", policyOf(s), fams, errs, tt.policy, tt.families)
			}
		})
	}
}

func TestClusterIPValidation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		st     strategy
		mutate func(*corev1.Service)
		want   string
	}{
		{"dual-stack required on single-stack", single, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		}, `spec.ipFamilyPolicy: Invalid value: "RequireDualStack": this cluster is not configured for dual-stack services`},
		{"family not configured", single, func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}, `spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster`},
		{"IPv6 cluster IP on IPv4 cluster", single, func(s *corev1.Service) { s.Spec.ClusterIP = "fd00::5" },
			`spec.clusterIPs[0]: Invalid value: ["fd00::5"]: IPv6 is not configured on this cluster`},
		{"plural without singular", single, func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.5"} },
			"spec.clusterIPs: Invalid value: [\"10.96.0.5\"]: must be empty when `clusterIP` is not specified"},
		{"first must match", single, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.6"}
		}, "spec.clusterIPs: Invalid value: [\"10.96.0.6\"]: first value must match `clusterIP`"},
		{"bad IP", single, func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.500" },
			`spec.clusterIPs[0]: Invalid value: "10.96.0.500": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
		{"leading zeros", single, func(s *corev1.Service) { s.Spec.ClusterIP = "010.96.0.50" },
			`spec.clusterIPs[0]: Invalid value: "010.96.0.50": must not have leading 0s`},
		{"None among others", dual, func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None", "fd00::1"}
		}, `spec.clusterIPs: Invalid value: ["None","fd00::1"]: 'None' must be the first and only value`},
		{"two of one family", dual, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5", "10.96.0.6"}
		}, `spec.clusterIPs: Invalid value: ["10.96.0.5","10.96.0.6"]: may specify no more than one IP for each IP family`},
		{"single-stack with two IPs", dual, func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5", "fd00:10:96::5"}
		}, `spec.ipFamilyPolicy: Invalid value: "SingleStack": must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified`},
		{"family mismatch", dual, func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.5"
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}, "spec.clusterIPs[0]: Invalid value: \"10.96.0.5\": expected an IPv6 value as indicated by `ipFamilies[0]`"},
		{"ExternalName with a cluster IP", single, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "db.example.com", "10.96.0.5"
		}, "spec.clusterIPs: Forbidden: may not be set for ExternalName services"},
		{"headless LoadBalancer", single, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeLoadBalancer, "None"
		}, `spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for LoadBalancer services`},
		{"health check node port without Local", single, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.HealthCheckNodePort = corev1.ServiceTypeLoadBalancer, 30100
		}, "spec.healthCheckNodePort: Invalid value: 30100: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"},
		{"allocateLoadBalancerNodePorts on NodePort", single, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeNodePort, ptr.To(false)
		}, "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, errs := create(tt.st, tt.mutate); strings.Join(errs, "\n") != tt.want {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(errs, "\n"), tt.want)
			}
		})
	}
	// LoadBalancer with Local needs no health check node port yet: the
	// write allocates it.
	if _, errs := create(single, func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
	}); len(errs) > 0 {
		t.Errorf("LoadBalancer with Local: %v", errs)
	}
}

func TestServiceUpdates(t *testing.T) {
	stored := func(mutate func(*corev1.Service)) *corev1.Service {
		s, errs := create(single, func(s *corev1.Service) {
			s.Spec.ClusterIP = "10.96.0.10"
			if mutate != nil {
				mutate(s)
			}
		})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return s
	}
	nodePort := stored(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
	})

	_, errs := update(single, nodePort, func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.50" })
	if want := `spec.clusterIPs[0]: Invalid value: ["10.96.0.50"]: may not change once set`; strings.Join(errs, "\n") != want {
		t.Errorf("clusterIP change: got %v, want %s", errs, want)
	}
	// Re-sending a manifest without the allocated values keeps them.
	s, errs := update(single, nodePort, func(s *corev1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports[0].NodePort = "", nil, 0
	})
	if len(errs) > 0 || s.Spec.ClusterIP != "10.96.0.10" || s.Spec.Ports[0].NodePort != 30080 {
		t.Errorf("re-apply: %v %s %d", errs, s.Spec.ClusterIP, s.Spec.Ports[0].NodePort)
	}
	s, errs = update(single, nodePort, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP })
	if len(errs) > 0 || s.Spec.Ports[0].NodePort != 0 || s.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("NodePort to ClusterIP: %v, nodePort %d, policy %q", errs, s.Spec.Ports[0].NodePort, s.Spec.ExternalTrafficPolicy)
	}
	s, errs = update(single, nodePort, func(s *corev1.Service) {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
	})
	if len(errs) > 0 || s.Spec.ClusterIP != "" || s.Spec.IPFamilies != nil || s.Spec.IPFamilyPolicy != nil || s.Spec.InternalTrafficPolicy != nil {
		t.Errorf("to ExternalName: %v %+v", errs, s.Spec)
	}
	lb := stored(func(s *corev1.Service) {
		s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, ptr.To("example.com/lb")
	})
	_, errs = update(single, lb, func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") })
	if want := `spec.loadBalancerClass: Invalid value: "example.com/other": may not change once set`; strings.Join(errs, "\n") != want {
		t.Errorf("loadBalancerClass change: got %v", errs)
	}
	dualSvc, errs := create(dual, func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10", "fd00:10:96::10"}
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	s, errs = update(dual, dualSvc, func(s *corev1.Service) { s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack) })
	if len(errs) > 0 || len(s.Spec.ClusterIPs) != 1 || len(s.Spec.IPFamilies) != 1 {
		t.Errorf("downgrade: %v %v %v", errs, s.Spec.ClusterIPs, s.Spec.IPFamilies)
	}
	_, errs = update(dual, dualSvc, func(s *corev1.Service) { s.Spec.ClusterIPs = s.Spec.ClusterIPs[:1] })
	if want := `spec.ipFamilyPolicy: Invalid value: "RequireDualStack": must be 'SingleStack' to release the secondary cluster IP`; strings.Join(errs, "\n") != want {
		t.Errorf("release without SingleStack: got %v", errs)
	}
}
