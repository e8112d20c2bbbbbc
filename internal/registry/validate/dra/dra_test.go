package dra

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// want is one expected error: its type, its field path and, when set, a
// part of its detail.
type want struct {
	typ    field.ErrorType
	field  string
	detail string
}

func (w want) String() string {
	return w.typ.String() + " " + w.field + " " + w.detail
}

func errorOf(typ field.ErrorType) func(path string, detail ...string) want {
	return func(path string, detail ...string) want {
		return want{typ: typ, field: path, detail: strings.Join(detail, "")}
	}
}

var (
	required     = errorOf(field.ErrorTypeRequired)
	invalid      = errorOf(field.ErrorTypeInvalid)
	forbidden    = errorOf(field.ErrorTypeForbidden)
	notSupported = errorOf(field.ErrorTypeNotSupported)
	notFound     = errorOf(field.ErrorTypeNotFound)
	duplicate    = errorOf(field.ErrorTypeDuplicate)
	tooMany      = errorOf(field.ErrorTypeTooMany)
	tooLong      = errorOf(field.ErrorTypeTooLong)
)

// assertErrors checks that got holds exactly the wanted errors, in any
// order.
func assertErrors(t *testing.T, got field.ErrorList, wants []want) {
	t.Helper()
	matched := make([]bool, len(got))
	var missing []want
	for _, w := range wants {
		found := false
		for i, err := range got {
			if !matched[i] && err.Type == w.typ && err.Field == w.field && strings.Contains(err.Detail, w.detail) {
				matched[i], found = true, true
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	for _, w := range missing {
		t.Errorf("missing error: %s", w)
	}
	for i, err := range got {
		if !matched[i] {
			t.Errorf("unexpected error: %v", err)
		}
	}
}

func TestShortenKey(t *testing.T) {
	for _, tc := range []struct {
		key   string
		limit int
		want  string
	}{
		{"short", 64, "short"},
		{strings.Repeat("x", 10) + strings.Repeat("y", 10), 16, "xxxxxxx...yyyyyy"},
		{"abcdefghijklmnopq", 4, "abcdefg...lmnopq"}, // limits below 16 are raised
	} {
		if got := shortenKey(tc.key, tc.limit); got != tc.want {
			t.Errorf("shortenKey(%q, %d) = %q, want %q", tc.key, tc.limit, got, tc.want)
		}
	}
}
