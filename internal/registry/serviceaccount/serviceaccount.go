// Package serviceaccount is the ServiceAccount resource; upstream checks
// nothing beyond its metadata, and `kubectl get` shows the number of
// secrets it references.
package serviceaccount

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes service accounts.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
		Resource:            "serviceaccounts",
		Singular:            "serviceaccount",
		ShortNames:          []string{"sa"},
		Namespaced:          true,
		ReturnDeletedObject: true,
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Secrets", Type: "string",
				Description: corev1.ServiceAccount{}.SwaggerDoc()["secrets"]},
				Cell: func(o runtime.Object) interface{} { return int64(len(o.(*corev1.ServiceAccount).Secrets)) }},
			registry.AgeColumn(),
		},
	}
}
