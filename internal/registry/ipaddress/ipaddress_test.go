package ipaddress

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func ref() *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}
}

func valid() *networkingv1.IPAddress {
	return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.1"},
		Spec: networkingv1.IPAddressSpec{ParentRef: ref()}}
}

// The messages and their order are upstream's (v1.37.2) with declarative
// validation as enforced by default, as its strategy gives them.
func TestValidateName(t *testing.T) {
	for name, want := range map[string]string{
		"10.0.0.1":       "",
		"2001:db8::1":    "",
		"2001:db8:0::1":  `must be in canonical form ("2001:db8::1")`,
		"010.0.0.1":      "must not have leading 0s",
		"::ffff:1.2.3.4": "must not be an IPv4-mapped IPv6 address",
		"foo":            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
	} {
		got := ValidateName(name, false)
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	parent := func(r *networkingv1.ParentReference) func(*networkingv1.IPAddress) {
		return func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = r }
	}
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*networkingv1.IPAddress]{
		{Name: "valid", Change: func(*networkingv1.IPAddress) {}},
		{Name: "cluster-scoped parent of a group", Change: parent(&networkingv1.ParentReference{Group: "example.com", Resource: "gateways", Name: "gw"})},
		{Name: "no parentRef", Change: parent(nil), Want: []string{"spec.parentRef: Required value"}},
		{Name: "empty parentRef", Change: parent(&networkingv1.ParentReference{}), Want: []string{
			"spec.parentRef.resource: Required value",
			"spec.parentRef.name: Required value",
		}},
		{Name: "bad parts", Change: parent(&networkingv1.ParentReference{Group: "Bad_Group", Resource: "a/b", Namespace: "..", Name: "x%y"}), Want: []string{
			`spec.parentRef.group: Invalid value: "Bad_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.parentRef.resource: Invalid value: "a/b": may not contain '/'`,
			`spec.parentRef.name: Invalid value: "x%y": may not contain '%'`,
			`spec.parentRef.namespace: Invalid value: "..": may not be '..'`,
		}},
		// The declarative required errors come after the hand-written ones.
		{Name: "no resource, bad name", Change: parent(&networkingv1.ParentReference{Name: "a/b"}), Want: []string{
			`spec.parentRef.name: Invalid value: "a/b": may not contain '/'`,
			"spec.parentRef.resource: Required value",
		}},
		{Name: "bad resource, no name", Change: parent(&networkingv1.ParentReference{Resource: "."}), Want: []string{
			`spec.parentRef.resource: Invalid value: ".": may not be '.'`,
			"spec.parentRef.name: Required value",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	parent := func(r *networkingv1.ParentReference) func(*networkingv1.IPAddress) {
		return func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef = r }
	}
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*networkingv1.IPAddress]{
		{Name: "unchanged", Change: func(*networkingv1.IPAddress) {}},
		{Name: "labels only", Change: func(ip *networkingv1.IPAddress) { ip.Labels = map[string]string{"a": "b"} }},
		{Name: "other parent", Change: func(ip *networkingv1.IPAddress) { ip.Spec.ParentRef.Name = "other" }, Want: []string{
			"spec.parentRef: Invalid value: null: field is immutable",
		}},
		{Name: "no parent", Change: parent(nil), Want: []string{
			"spec.parentRef: Required value",
			"spec.parentRef: Invalid value: null: field is immutable",
		}},
		{Name: "bad parent", Change: parent(&networkingv1.ParentReference{Resource: "services", Name: "a/b"}), Want: []string{
			`spec.parentRef.name: Invalid value: "a/b": may not contain '/'`,
			"spec.parentRef: Invalid value: null: field is immutable",
		}},
		{Name: "parent without name", Change: parent(&networkingv1.ParentReference{Resource: "services"}), Want: []string{
			"spec.parentRef.name: Required value",
			"spec.parentRef: Invalid value: null: field is immutable",
		}},
	})
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name string
		ref  *networkingv1.ParentReference
		want string
	}{
		{"service", ref(), "services/default/web"},
		{"grouped, upper case", &networkingv1.ParentReference{Group: "MyGroup", Resource: "MyResource", Namespace: "ns", Name: "Name"}, "myresource.mygroup/ns/Name"},
		{"cluster-scoped", &networkingv1.ParentReference{Group: "example.com", Resource: "gateways", Name: "gw"}, "gateways.example.com/gw"},
		{"none", nil, "<none>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip := valid()
			ip.Spec.ParentRef = tt.ref
			registrytest.ExpectRow(t, Resource().Columns, ip, []string{"Name", "ParentRef", "Age"},
				[]interface{}{"10.0.0.1", tt.want, "<unknown>"})
		})
	}
	// As upstream's printer: the age is a cell of every row, but only NAME
	// and PARENTREF are declared columns.
	cols := Resource().Columns
	if cols[0].Undeclared || cols[1].Undeclared || !cols[2].Undeclared {
		t.Error("only the age column should be undeclared")
	}
	if d := cols[1].Description; d != (networkingv1.IPAddressSpec{}).SwaggerDoc()["parentRef"] || d == "" {
		t.Errorf("ParentRef description %q", d)
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "ipaddresses" || r.Singular != "ipaddress" || r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 1 || r.ShortNames[0] != "ip" || len(r.Categories) != 0 ||
		r.Kind.String() != "networking.k8s.io/v1, Kind=IPAddress" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if got := r.GenerateName("10.0.0.7"); got != "10.0.0.7" {
		t.Errorf("generated name %q, want generateName itself", got)
	}
}
