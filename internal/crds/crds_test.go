package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestLoad: every set decodes into definitions of its project's group,
// each with a served storage version.
func TestLoad(t *testing.T) {
	for s, group := range map[Set]string{MetalLB: "metallb.io", GatewayAPI: "gateway.networking.k8s.io"} {
		defs, err := Load(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range defs {
			if d.CRD.Spec.Group != group || d.CRD.Name != d.CRD.Spec.Names.Plural+"."+group {
				t.Errorf("%s: %s of group %s", s, d.CRD.Name, d.CRD.Spec.Group)
			}
			if !hasStorage(d.CRD) {
				t.Errorf("%s: %s has no served storage version", s, d.CRD.Name)
			}
		}
	}
}

func hasStorage(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if v.Storage && v.Served {
			return true
		}
	}
	return false
}
