// Package serviceaccount is the ServiceAccount resource; upstream checks
// nothing beyond its metadata, and `kubectl get` shows the number of
// secrets it references. Its token subresource (TokenRequest) issues the
// service account's tokens.
package serviceaccount

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes service accounts; tokens, when set, serves
// serviceaccounts/token.
func Resource(tokens *Tokens) *registry.Resource {
	r := &registry.Resource{
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
	if tokens != nil {
		r.Actions = map[string]registry.Action{"token": {Kind: tokenRequestKind, Create: tokens.request}}
	}
	return r
}
