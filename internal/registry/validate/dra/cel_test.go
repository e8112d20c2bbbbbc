package dra

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

func TestCELError(t *testing.T) {
	path := field.NewPath("expression")
	for _, tc := range []struct {
		errType apiservercel.ErrorType
		want    want
	}{
		{apiservercel.ErrorTypeRequired, required("expression", "detail")},
		{apiservercel.ErrorTypeInvalid, invalid("expression", "detail")},
		{apiservercel.ErrorTypeInternal, want{typ: field.ErrorTypeInternal, field: "expression", detail: "detail"}},
		{"Unknown", want{typ: field.ErrorTypeInternal, field: "expression", detail: "unsupported error type: detail"}},
	} {
		err := celError(&apiservercel.Error{Type: tc.errType, Detail: "detail"}, "x", path)
		assertErrors(t, field.ErrorList{err}, []want{tc.want})
	}
}
