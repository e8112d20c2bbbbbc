package storageversionmigration

import (
	"testing"
	"time"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *storagemigrationv1.StorageVersionMigration {
	return &storagemigrationv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "test-svm"},
		Spec:       storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}},
	}
}

func TestValidate(t *testing.T) {
	type svm = *storagemigrationv1.StorageVersionMigration
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[svm]{
		{Name: "valid", Change: func(svm) {}},
		{Name: "core group", Change: func(s svm) { s.Spec.Resource.Group = "" }},
		{Name: "empty", Change: func(s svm) { s.Spec.Resource = metav1.GroupResource{} }, Want: []string{
			"spec.resource.resource: Required value: resource is required to be set",
		}},
		{Name: "invalid", Change: func(s svm) { s.Spec.Resource = metav1.GroupResource{Group: "Apps_", Resource: "1deployments"} }, Want: []string{
			`spec.resource.resource: Invalid value: "1deployments": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`spec.resource.group: Invalid value: "Apps_": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
	})
}

func cond(t string, s metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: "R", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func TestValidateUpdate(t *testing.T) {
	type svm = *storagemigrationv1.StorageVersionMigration
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[svm]{
		{Name: "unchanged", Change: func(svm) {}},
		{Name: "spec changed", Change: func(s svm) { s.Spec.Resource.Resource = "statefulsets" }, Want: []string{
			`spec: Invalid value: {"Resource":{"group":"apps","resource":"statefulsets"}}: field is immutable`,
		}},
		{Name: "status set", Change: func(s svm) {
			s.Status.ResourceVersion = "42"
			s.Status.Conditions = []metav1.Condition{cond("Running", metav1.ConditionTrue)}
		}},
		{Name: "bad resource version", Change: func(s svm) { s.Status.ResourceVersion = "abc" }, Want: []string{
			`status.resourceVersion: Invalid value: "abc": resource version is not well formed: abc`,
		}},
		{Name: "resource version changed", Old: func(s svm) { s.Status.ResourceVersion = "42" },
			Change: func(s svm) { s.Status.ResourceVersion = "43" }, Want: []string{
				`status.resourceVersion: Invalid value: "43": field is immutable`,
			}},
		{Name: "succeeded undone", Old: func(s svm) {
			s.Status.Conditions = []metav1.Condition{cond("Succeeded", metav1.ConditionTrue)}
		}, Change: func(s svm) { s.Status.Conditions[0].Status = metav1.ConditionFalse }, Want: []string{
			`status.conditions: Invalid value: [{"type":"Succeeded","status":"False","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"R","message":""}]: Success condition cannot be set to false once it is true`,
		}},
	})
}

func TestColumns(t *testing.T) {
	s := valid()
	cols := Resource().Columns
	names := []string{"Name", "Resource", "Status"}
	registrytest.ExpectRow(t, cols, s, names, []interface{}{"test-svm", "deployments.apps", "Unknown"})
	s.Status.Conditions = []metav1.Condition{cond("Running", metav1.ConditionFalse), cond("Succeeded", metav1.ConditionTrue)}
	registrytest.ExpectRow(t, cols, s, names, []interface{}{"test-svm", "deployments.apps", "Succeeded"})
	if cols[0].Format != "" {
		t.Errorf("Name column format %q, upstream's has none", cols[0].Format)
	}
}
