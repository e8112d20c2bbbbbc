package all

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestResourceRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation,
	// columns, selectable fields, delete answers with the object
	want := map[string]string{
		"resource.k8s.io/v1, Resource=deviceclasses":          "||false|false|true|Name,Age||true",
		"resource.k8s.io/v1, Resource=resourceclaims":         "||true|true|false|Name,State,Age||true",
		"resource.k8s.io/v1, Resource=resourceclaimtemplates": "||true|false|false|Name,Age||true",
		"resource.k8s.io/v1, Resource=resourceslices":         "||false|false|true|Name,Node,Driver,Pool,Age|spec.driver,spec.nodeName,spec.pool.name|true",
		"resource.k8s.io/v1, Resource=devicetaintrules":       "||false|true|true|Name,Key,Value,Effect,TimeAdded,Age||false",
	}
	checkRegistered(t, resourceGroup(), want, selectableFields(t), func(r *registry.Resource) string { return boolString(r.ReturnDeletedObject) })
}
