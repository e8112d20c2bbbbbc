package all

import (
	"slices"
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestCertificatesRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation,
	// columns, selectable fields, subresources beyond status
	want := map[string]string{
		"certificates.k8s.io/v1, Resource=certificatesigningrequests": "csr||false|true|false|Name,Age,SignerName,Requestor,RequestedDuration,Condition|spec.signerName|approval",
		"certificates.k8s.io/v1, Resource=clustertrustbundles":        "||false|false|false|Name,SignerName|spec.signerName|",
		"certificates.k8s.io/v1, Resource=podcertificaterequests":     "||true|true|false|Name,PodName,ServiceAccountName,NodeName,SignerName,State,UnverifiedUserAnnotations|spec.nodeName,spec.podName,spec.signerName|",
	}
	subresources := func(r *registry.Resource) string {
		var names []string
		for n := range r.Subresources {
			names = append(names, n)
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	checkRegistered(t, certificates(Deps{}), want, selectableFields(t), subresources)
}

// selectableFields renders, for checkRegistered, the field selectors a
// resource adds to metadata.name and metadata.namespace, sorted.
func selectableFields(t *testing.T) func(*registry.Resource) string {
	return func(r *registry.Resource) string {
		if r.Fields == nil {
			return ""
		}
		obj, err := registry.Scheme.New(r.Kind)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range r.Fields(obj) {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return strings.Join(keys, ",")
	}
}
