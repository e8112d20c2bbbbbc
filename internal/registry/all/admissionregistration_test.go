package all

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestAdmissionRegistrationRegister(t *testing.T) {
	set, err := registry.NewSet(admissionregistration(Deps{})...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"admissionregistration.k8s.io/v1, Resource=validatingwebhookconfigurations":   "|api-extensions|false|false|true|Name,Webhooks,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingwebhookconfigurations":     "|api-extensions|false|false|true|Name,Webhooks,Age",
		"admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicies":       "|api-extensions|false|true|true|Name,Validations,ParamKind,Age",
		"admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicybindings": "|api-extensions|false|false|true|Name,PolicyName,ParamRef,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicies":         "|api-extensions|false|false|true|Name,Mutations,ParamKind,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicybindings":   "|api-extensions|false|false|true|Name,PolicyName,ParamRef,Age",
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		var columns []string
		for _, c := range r.Columns {
			columns = append(columns, c.Name)
		}
		got := strings.Join([]string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Namespaced), boolString(r.Status), boolString(r.Generation), strings.Join(columns, ",")}, "|")
		if w, ok := want[gvr]; !ok || got != w {
			t.Errorf("%s: %s, want %q", gvr, got, w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}
