package registry

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// NameColumn is the NAME column every table starts with; format "name" is
// how kubectl finds the column to prefix with kind/.
func NameColumn() Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		Cell: func(o runtime.Object) interface{} {
			a, err := meta.Accessor(o)
			if err != nil {
				return ""
			}
			return a.GetName()
		},
	}
}

// AgeColumn is the AGE column: time since creation, as upstream prints it.
func AgeColumn() Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		Cell: func(o runtime.Object) interface{} {
			a, err := meta.Accessor(o)
			if err != nil {
				return "<unknown>"
			}
			return Age(a.GetCreationTimestamp())
		},
	}
}

// Age renders the time since t as kubectl shows it ("5m", "3d4h").
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// TextColumn is a string column of objects of type T, its cell rendered by
// f.
func TextColumn[T runtime.Object](name, description string, f func(T) string) Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: "string", Description: description},
		Cell:                  func(o runtime.Object) interface{} { return f(o.(T)) },
	}
}

// DefaultColumns is the table for kinds without columns of their own.
func DefaultColumns() []Column { return []Column{NameColumn(), AgeColumn()} }
