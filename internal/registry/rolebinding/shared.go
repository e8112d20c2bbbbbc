package rolebinding

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/role"
)

// This file holds what RoleBindings and ClusterRoleBindings share.

// Default is upstream's SetDefaults_RoleBinding (or ClusterRoleBinding)
// and SetDefaults_Subject: roleRef.apiGroup and the apiGroup of User and
// Group subjects default to the RBAC group.
func Default(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// ValidateRoleRef is the roleRef half of upstream's ValidateRoleBinding
// and ValidateClusterRoleBinding: the RBAC group, one of kinds, and a
// name (required, covered by the declarative check) that is a path
// segment.
func ValidateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(path.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	known := false
	for _, k := range kinds {
		known = known || ref.Kind == k
	}
	if !known {
		errs = append(errs, field.NotSupported(path.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "").MarkCoveredByDeclarative())
	} else {
		for _, msg := range role.ValidateName(ref.Name, false) {
			errs = append(errs, field.Invalid(path.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

// internalRoleRef has the fields of upstream's internal rbac.RoleRef,
// which carry no JSON tags: upstream's immutable error shows the new
// roleRef as {"APIGroup":"…","Kind":"…","Name":"…"}.
type internalRoleRef struct{ APIGroup, Kind, Name string }

// ValidateRoleRefUpdate is upstream's immutable roleRef: "field is
// immutable", with the new roleRef. Its declarative twin is alpha, never
// enforced, so this error always stands.
func ValidateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if apiequality.Semantic.DeepEqual(ref, old) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("roleRef"), internalRoleRef(ref), validation.FieldImmutableErrorMsg)}.
		WithOrigin("immutable").MarkCoveredByDeclarative()
}

// ValidateSubjects checks each subject with ValidateSubject under
// "subjects".
func ValidateSubjects(subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, s := range subjects {
		errs = append(errs, ValidateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

// ValidateSubject is upstream's ValidateRoleBindingSubject: a name
// (required, covered by the declarative check); a ServiceAccount's is a
// DNS subdomain, in the core group, and in a ClusterRoleBinding (not
// namespaced) with its namespace; Users and Groups are of the RBAC group.
func ValidateSubject(s rbacv1.Subject, namespaced bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "").MarkCoveredByDeclarative())
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range validation.ValidateServiceAccountName(s.Name, false) {
				errs = append(errs, field.Invalid(path.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(path.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(path.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(path.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("kind"), s.Kind,
			[]string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// Declarative is upstream's generated validation of a RoleBinding or
// ClusterRoleBinding as enforced (its beta tags), in its order: each
// subject's name is required, unless an update leaves the subjects as
// they were; roleRef.name is required on create. On update a changed
// roleRef meets only the alpha (unenforced) immutable check, which stops
// its declarative validation, and an unchanged one none.
func Declarative(ref rbacv1.RoleRef, subjects, old []rbacv1.Subject, update bool) field.ErrorList {
	var errs field.ErrorList
	if !update || !apiequality.Semantic.DeepEqual(subjects, old) {
		for i, s := range subjects {
			if s.Name == "" {
				errs = append(errs, field.Required(field.NewPath("subjects").Index(i).Child("name"), "").MarkBeta())
			}
		}
	}
	if !update && ref.Name == "" {
		errs = append(errs, field.Required(field.NewPath("roleRef", "name"), "").MarkBeta())
	}
	return errs
}

// Columns is upstream's table of a RoleBinding or ClusterRoleBinding
// (noun names it in the descriptions): NAME, ROLE (kind/name) and AGE,
// and wide the USERS, GROUPS and SERVICEACCOUNTS (namespace/name) bound,
// each joined by ", ".
func Columns(roleRefDoc, noun string, binding func(runtime.Object) (rbacv1.RoleRef, []rbacv1.Subject)) []registry.Column {
	subjects := func(pick func(users, groups, sas []string) []string) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} {
			_, subjects := binding(o)
			users, groups, sas := subjectsStrings(subjects)
			return strings.Join(pick(users, groups, sas), ", ")
		}
	}
	wide := func(name, description string, cell func(runtime.Object) interface{}) registry.Column {
		return registry.Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: "string", Priority: 1,
			Description: description}, Cell: cell}
	}
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Role", Type: "string", Description: roleRefDoc},
			Cell: func(o runtime.Object) interface{} {
				ref, _ := binding(o)
				return ref.Kind + "/" + ref.Name
			}},
		registry.AgeColumn(),
		wide("Users", "Users in the "+noun, subjects(func(u, _, _ []string) []string { return u })),
		wide("Groups", "Groups in the "+noun, subjects(func(_, g, _ []string) []string { return g })),
		wide("ServiceAccounts", "ServiceAccounts in the "+noun, subjects(func(_, _, sa []string) []string { return sa })),
	}
}

// subjectsStrings is upstream's SubjectsStrings without the others.
func subjectsStrings(subjects []rbacv1.Subject) (users, groups, sas []string) {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return users, groups, sas
}
