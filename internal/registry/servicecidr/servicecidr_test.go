package servicecidr

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/16"}}}
}

// The messages are upstream's (v1.37.2), as its strategy gives them.
func TestValidate(t *testing.T) {
	cidrs := func(c ...string) func(*networkingv1.ServiceCIDR) {
		return func(s *networkingv1.ServiceCIDR) { s.Spec.CIDRs = c }
	}
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*networkingv1.ServiceCIDR]{
		{Name: "valid", Change: func(*networkingv1.ServiceCIDR) {}},
		{Name: "dual-stack", Change: cidrs("10.0.0.0/16", "fd00::/64")},
		{Name: "none", Change: cidrs(), Want: []string{"spec.cidrs: Required value: at least one CIDR required"}},
		{Name: "three", Change: cidrs("10.0.0.0/16", "fd00::/64", "10.1.0.0/16"), Want: []string{
			`spec.cidrs: Invalid value: {"CIDRs":["10.0.0.0/16","fd00::/64","10.1.0.0/16"]}: may only hold up to 2 values`,
		}},
		{Name: "same family", Change: cidrs("10.0.0.0/16", "10.1.0.0/16"), Want: []string{
			`spec.cidrs: Invalid value: ["10.0.0.0/16","10.1.0.0/16"]: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`,
		}},
		{Name: "not CIDRs", Change: cidrs("10.0.0.0", "10.0.0.1/16"), Want: []string{
			`spec.cidrs[0]: Invalid value: "10.0.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
			`spec.cidrs[1]: Invalid value: "10.0.0.1/16": must not have bits set beyond the prefix length`,
		}},
		{Name: "non-canonical IPv6 of one family", Change: cidrs("fd00::1/64", "fd00:0::/64"), Want: []string{
			`spec.cidrs[0]: Invalid value: "fd00::1/64": must not have bits set beyond the prefix length`,
			`spec.cidrs[1]: Invalid value: "fd00:0::/64": must be in canonical form ("fd00::/64")`,
			`spec.cidrs: Invalid value: ["fd00::1/64","fd00:0::/64"]: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`,
		}},
		{Name: "leading zeros", Change: cidrs("010.0.0.0/16"), Want: []string{
			`spec.cidrs[0]: Invalid value: "010.0.0.0/16": must not have leading 0s in IP or prefix length`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	cidrs := func(c ...string) func(*networkingv1.ServiceCIDR) {
		return func(s *networkingv1.ServiceCIDR) { s.Spec.CIDRs = c }
	}
	dual := cidrs("10.0.0.0/16", "fd00::/64")
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*networkingv1.ServiceCIDR]{
		{Name: "unchanged", Change: func(*networkingv1.ServiceCIDR) {}},
		{Name: "labels only", Change: func(s *networkingv1.ServiceCIDR) { s.Labels = map[string]string{"a": "b"} }},
		{Name: "changed", Change: cidrs("10.1.0.0/16"), Want: []string{`spec.cidrs[0]: Invalid value: "10.1.0.0/16": field is immutable`}},
		{Name: "to dual-stack", Change: dual},
		{Name: "to dual-stack of one family", Change: cidrs("10.0.0.0/16", "10.2.0.0/16"), Want: []string{
			`spec.cidrs: Invalid value: ["10.0.0.0/16","10.2.0.0/16"]: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`,
		}},
		{Name: "to dual-stack changing the first", Change: cidrs("10.1.0.0/16", "fd00::/64"), Want: []string{
			`spec.cidrs[0]: Invalid value: "10.1.0.0/16": field is immutable`,
		}},
		{Name: "to dual-stack with a bad CIDR", Change: cidrs("10.0.0.0/16", "fd00::1/64"), Want: []string{
			`spec.cidrs[1]: Invalid value: "fd00::1/64": must not have bits set beyond the prefix length`,
		}},
		{Name: "dual to single", Old: dual, Change: cidrs("10.0.0.0/16"), Want: []string{
			`spec.cidrs: Invalid value: ["10.0.0.0/16"]: field is immutable`,
		}},
		{Name: "dual swapped", Old: dual, Change: cidrs("fd00::/64", "10.0.0.0/16"), Want: []string{
			`spec.cidrs[0]: Invalid value: "fd00::/64": field is immutable`,
			`spec.cidrs[1]: Invalid value: "10.0.0.0/16": field is immutable`,
		}},
		{Name: "to none", Change: cidrs(), Want: []string{`spec.cidrs: Invalid value: null: field is immutable`}},
	})
}

func TestColumns(t *testing.T) {
	c := valid()
	c.Spec.CIDRs = []string{"10.96.0.0/12", "fd00:10:96::/112"}
	registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "CIDRs", "Age"},
		[]interface{}{"extra", "10.96.0.0/12,fd00:10:96::/112", "<unknown>"})
	if d := Resource().Columns[1].Description; d != (networkingv1.ServiceCIDRSpec{}).SwaggerDoc()["cidrs"] || d == "" {
		t.Errorf("CIDRs description %q", d)
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "servicecidrs" || r.Singular != "servicecidr" || r.Namespaced || !r.Status || r.Generation ||
		len(r.ShortNames) != 0 || len(r.Categories) != 0 || r.Kind.String() != "networking.k8s.io/v1, Kind=ServiceCIDR" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
