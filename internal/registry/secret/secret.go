// Package secret is the Secret strategy: stringData is folded into data,
// the type defaults to Opaque, the keys each type requires are checked with
// upstream's messages, and type and immutable secrets cannot change.
package secret

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes secrets.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("Secret"),
		Resource:   "secrets",
		Singular:   "secret",
		Namespaced: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
				Cell: func(o runtime.Object) interface{} { return string(o.(*corev1.Secret).Type) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
				Cell: func(o runtime.Object) interface{} { return int64(len(o.(*corev1.Secret).Data)) }},
			registry.AgeColumn(),
		},
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"type": string(obj.(*corev1.Secret).Type)}
		},
	}
}

type strategy struct{ registry.Base }

// Default folds stringData into data, as the v1 conversion does (stringData
// wins and is never stored), and defaults the type to Opaque.
func (strategy) Default(obj runtime.Object) {
	s := obj.(*corev1.Secret)
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSecret(obj.(*corev1.Secret))
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	s, prev := obj.(*corev1.Secret), old.(*corev1.Secret)
	errs := apivalidation.ValidateImmutableField(s.Type, prev.Type, field.NewPath("type"))
	if prev.Immutable != nil && *prev.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, prev.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateSecret(s)...)
}

// validateSecret follows upstream's ValidateSecret.
func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	total := 0
	for _, key := range slices.Sorted(maps.Keys(s.Data)) {
		value := s.Data[key]
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		total += len(value)
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(data, "", corev1.MaxSecretSize))
	}
	required := func(key string) {
		errs = append(errs, field.Required(data.Key(key), ""))
	}
	wellFormedJSON := func(key string) {
		raw, ok := s.Data[key]
		if !ok {
			required(key)
			return
		}
		if err := json.Unmarshal(raw, &map[string]interface{}{}); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), "<secret contents redacted>", err.Error()))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		wellFormedJSON(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		wellFormedJSON(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, password := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !password {
			required(corev1.BasicAuthUsernameKey)
			required(corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			required(corev1.SSHAuthPrivateKey)
		}
	case corev1.SecretTypeTLS:
		if _, ok := s.Data[corev1.TLSCertKey]; !ok {
			required(corev1.TLSCertKey)
		}
		if _, ok := s.Data[corev1.TLSPrivateKeyKey]; !ok {
			required(corev1.TLSPrivateKeyKey)
		}
	}
	return errs
}
