package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func TestColumn(t *testing.T) {
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"none", nil, "<none>"},
		{"one", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 8080}}}},
			"10.0.0.1:8080"},
		{"five addresses", []corev1.EndpointSubset{{
			Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"),
			Ports:     []corev1.EndpointPort{{Port: 8080}}}},
			"10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 2 more..."},
		{"two ports", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"),
			Ports: []corev1.EndpointPort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}}},
			"10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."},
		{"headless without ports", []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "fd00::1")}}, "10.0.0.1,fd00::1"},
		{"ipv6", []corev1.EndpointSubset{{Addresses: addrs("fd00::1"), Ports: []corev1.EndpointPort{{Port: 53}}}}, "[fd00::1]:53"},
		{"only not ready", []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.0.0.9"), Ports: []corev1.EndpointPort{{Port: 80}}}}, ""},
	}
	col := Resource().Columns[1]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := col.Cell(&corev1.Endpoints{Subsets: tt.subsets}); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		subset corev1.EndpointSubset
		want   []string
	}{
		{"valid", corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 80}}}, nil},
		{"empty", corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 80}}},
			[]string{"subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"}},
		{"loopback", corev1.EndpointSubset{Addresses: addrs("127.0.0.1")},
			[]string{`subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{"unnamed ports", corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 80}, {Name: "b", Port: 81}}},
			[]string{"subsets[0].ports[0].name: Required value"}},
		{"port zero", corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 0}}},
			[]string{"subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{tt.subset}}
			s := strategy{}
			s.Default(ep)
			registrytest.ExpectErrors(t, s.Validate(ep), tt.want...)
			if ep.Subsets[0].Ports != nil && ep.Subsets[0].Ports[0].Protocol != corev1.ProtocolTCP {
				t.Errorf("protocol not defaulted")
			}
		})
	}
}
