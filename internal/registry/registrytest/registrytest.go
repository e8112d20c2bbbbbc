// Package registrytest holds what the tests of the per-kind strategies
// share: error lists as upstream's "field: message" strings, table-driven
// defaulting and validation of a kind's objects, the create path the API
// server runs an object through, the table row a resource's columns render,
// and the pod template of a valid workload.
package registrytest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Messages returns each error as upstream prints it: "field: message".
func Messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// Joined returns Messages one a line; "" when there are none.
func Joined(errs field.ErrorList) string {
	return strings.Join(Messages(errs), "\n")
}

// ExpectErrors reports an error unless errs are, in order, the want
// messages; no want means no errors.
func ExpectErrors(t testing.TB, errs field.ErrorList, want ...string) {
	t.Helper()
	if got := Messages(errs); !slices.Equal(got, want) {
		t.Errorf("errors\n got %q\nwant %q", got, want)
	}
}

// Created runs obj through the create path of the API server: the
// strategy's Default, its Admit (which must not refuse), then its
// PrepareForCreate.
func Created[T runtime.Object](s registry.Strategy, obj T) T {
	s.Default(obj)
	if a, ok := s.(registry.Admitter); ok {
		if err := a.Admit(context.Background(), obj); err != nil {
			panic(fmt.Sprintf("admission refused %T: %v", obj, err))
		}
	}
	s.PrepareForCreate(obj)
	return obj
}

// DefaultCase is one row of a table-driven defaulting test: the strategy's
// Default must turn In into Want.
type DefaultCase[T runtime.Object] struct {
	Name     string
	In, Want T
}

// RunDefault runs each case as a subtest.
func RunDefault[T runtime.Object](t *testing.T, s registry.Strategy, cases []DefaultCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			s.Default(tt.In)
			if !reflect.DeepEqual(tt.In, tt.Want) {
				t.Errorf("defaulted\n got %+v\nwant %+v", tt.In, tt.Want)
			}
		})
	}
}

// Case is one row of a table-driven validation test. Change turns a valid
// object into the one checked; Want lists the errors expected, in order, as
// "field: message" strings (none for an object that passes).
type Case[T runtime.Object] struct {
	Name string
	// Old, for updates only, changes the stored object first; nil keeps it
	// valid.
	Old    func(T)
	Change func(T)
	Want   []string
}

// RunValidate runs each case as a subtest: valid() changed by Change must
// give Want from the strategy's Validate.
func RunValidate[T runtime.Object](t *testing.T, s registry.Strategy, valid func() T, cases []Case[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			obj := valid()
			tt.Change(obj)
			ExpectErrors(t, s.Validate(obj), tt.Want...)
		})
	}
}

// RunValidateUpdate runs each case as a subtest: the stored object is
// valid() changed by Old, and a copy of it changed by Change must give Want
// from the strategy's ValidateUpdate.
func RunValidateUpdate[T runtime.Object](t *testing.T, s registry.Strategy, valid func() T, cases []Case[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			old := valid()
			if tt.Old != nil {
				tt.Old(old)
			}
			obj := old.DeepCopyObject().(T)
			tt.Change(obj)
			ExpectErrors(t, s.ValidateUpdate(obj, old), tt.Want...)
		})
	}
}

// PodTemplate is a workload's pod template that passes validation: the
// given labels and containers, restartPolicy Always.
func PodTemplate(labels map[string]string, containers ...corev1.Container) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: containers},
	}
}

// Names returns the names of columns, in order.
func Names(columns []registry.Column) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.Name
	}
	return out
}

// rowCells returns obj's row in the table of columns.
func rowCells(columns []registry.Column, obj runtime.Object) []interface{} {
	out := make([]interface{}, len(columns))
	for i, c := range columns {
		out[i] = c.Cell(obj)
	}
	return out
}

// ExpectRow reports an error unless the table of columns has the given
// column names and shows obj with the given cells.
func ExpectRow(t testing.TB, columns []registry.Column, obj runtime.Object, names []string, cells []interface{}) {
	t.Helper()
	gotNames, gotCells := Names(columns), rowCells(columns, obj)
	if !slices.Equal(gotNames, names) || !reflect.DeepEqual(gotCells, cells) {
		t.Errorf("columns %v %#v\nwant    %v %#v", gotNames, gotCells, names, cells)
	}
}

// TextRow returns obj's cells joined by "|", leaving out the AGE cell, which
// depends on the clock. Each cell must be a string.
func TextRow(t testing.TB, columns []registry.Column, obj runtime.Object) string {
	t.Helper()
	var out []string
	for _, c := range columns {
		if c.Name == "Age" {
			continue
		}
		cell, ok := c.Cell(obj).(string)
		if !ok {
			t.Fatalf("%s cell %v is a %T, not a string", c.Name, c.Cell(obj), c.Cell(obj))
		}
		out = append(out, cell)
	}
	return strings.Join(out, "|")
}
