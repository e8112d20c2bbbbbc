package endpointslice

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node-1")}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	strategy{}.Default(s)
	return s
}

func TestDefault(t *testing.T) {
	s := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP)}}}
	strategy{}.Default(s)
	want := []discoveryv1.EndpointPort{
		{Name: ptr.To(""), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)},
		{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP)},
	}
	if !reflect.DeepEqual(s.Ports, want) {
		t.Errorf("ports %+v, want %+v", s.Ports, want)
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*discoveryv1.EndpointSlice]{
		{Name: "valid", Change: func(*discoveryv1.EndpointSlice) {}},
		{Name: "fqdn", Change: func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints[0].Addresses = []string{"db.example.com", "localhost"}
		}, Want: []string{
			"endpoints[0].addresses[1]: Invalid value: \"localhost\": should be a domain with at least two segments separated by dots",
		}},
		{Name: "no address type", Change: func(s *discoveryv1.EndpointSlice) { s.AddressType = "" }, Want: []string{
			"addressType: Required value",
		}},
		{Name: "unsupported address type", Change: func(s *discoveryv1.EndpointSlice) { s.AddressType = "IP" }, Want: []string{
			"addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\"",
		}},
		{Name: "addresses", Change: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = []discoveryv1.Endpoint{
				{Addresses: nil},
				{Addresses: []string{"10.0.0.300", "fd00::1", "127.0.0.1", "169.254.1.1", "0.0.0.0"}},
			}
		}, Want: []string{
			"endpoints[0].addresses: Required value: must contain at least 1 address",
			"endpoints[1].addresses[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
			"endpoints[1].addresses[1]: Invalid value: \"fd00::1\": must be a valid IPv4 address",
			"endpoints[1].addresses[2]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
			"endpoints[1].addresses[3]: Invalid value: \"169.254.1.1\": may not be in the link-local range (169.254.0.0/16, fe80::/10)",
			"endpoints[1].addresses[4]: Invalid value: \"0.0.0.0\": may not be unspecified (0.0.0.0)",
		}},
		{Name: "too many endpoints", Change: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = make([]discoveryv1.Endpoint, 1001)
		}, Want: []string{
			"endpoints: Too many: 1001: must have at most 1000 items",
		}},
		{Name: "ports", Change: func(s *discoveryv1.EndpointSlice) {
			s.Ports = append(s.Ports,
				discoveryv1.EndpointPort{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP)},
				discoveryv1.EndpointPort{Name: ptr.To("Metrics"), Protocol: ptr.To(corev1.Protocol("ICMP"))},
				discoveryv1.EndpointPort{Name: ptr.To("grpc")},
			)
		}, Want: []string{
			"ports[1].name: Duplicate value: \"http\"",
			"ports[2].name: Invalid value: \"Metrics\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
			"ports[2].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
			"ports[3].protocol: Required value",
		}},
		{Name: "hints", Change: func(s *discoveryv1.EndpointSlice) {
			s.Endpoints[0].Hints = &discoveryv1.EndpointHints{
				ForZones: []discoveryv1.ForZone{{Name: "zone-a"}, {Name: "zone-a"}},
				ForNodes: []discoveryv1.ForNode{{Name: "Node_1"}},
			}
		}, Want: []string{
			"endpoints[0].hints.forZones[1].name: Duplicate value: \"zone-a\"",
			"endpoints[0].hints.forNodes[0].name: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
		}},
	})
}

func TestValidateUpdateAddressTypeImmutable(t *testing.T) {
	old := valid()
	s := old.DeepCopy()
	s.AddressType = discoveryv1.AddressTypeIPv6
	s.Endpoints[0].Addresses = []string{"fd00::1"}
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(s, old), "addressType: Invalid value: \"IPv6\": field is immutable")
}

func TestDeprecatedTopologyDropped(t *testing.T) {
	s := valid()
	s.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-1"}
	strategy{}.PrepareForCreate(s)
	if s.Endpoints[0].DeprecatedTopology != nil {
		t.Errorf("create kept deprecatedTopology %v", s.Endpoints[0].DeprecatedTopology)
	}

	old := valid()
	old.Endpoints[0].NodeName = nil
	old.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "node-7"}
	upd := old.DeepCopy()
	upd.Endpoints[0].Addresses = []string{"10.0.0.2"}
	strategy{}.PrepareForUpdate(upd, old)
	if upd.Endpoints[0].DeprecatedTopology != nil || upd.Endpoints[0].NodeName == nil || *upd.Endpoints[0].NodeName != "node-7" {
		t.Errorf("update: topology %v, nodeName %v; want nil and node-7", upd.Endpoints[0].DeprecatedTopology, upd.Endpoints[0].NodeName)
	}

	same := old.DeepCopy()
	strategy{}.PrepareForUpdate(same, old)
	if same.Endpoints[0].DeprecatedTopology == nil {
		t.Error("an update leaving the endpoints alone dropped their deprecatedTopology")
	}
}

func TestColumns(t *testing.T) {
	s := valid()
	for i := 2; i <= 5; i++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", i)}})
	}
	s.Ports = []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("metrics")}, {}, {Port: ptr.To[int32](443)}}
	registrytest.ExpectRow(t, Resource().Columns, s, []string{"Name", "AddressType", "Ports", "Endpoints", "Age"},
		[]interface{}{"web-abc", "IPv4", "80,metrics,* + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...", "<unknown>"})

	empty := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv6}
	if ports, eps := Resource().Columns[2].Cell(empty), Resource().Columns[3].Cell(empty); ports != "<unset>" || eps != "<unset>" {
		t.Errorf("empty slice cells %q, %q; want <unset>", ports, eps)
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Kind.String() != "discovery.k8s.io/v1, Kind=EndpointSlice" || r.Resource != "endpointslices" || !r.Namespaced ||
		!r.Generation || r.Status || len(r.ShortNames) != 0 {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
