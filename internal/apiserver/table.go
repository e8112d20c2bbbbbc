package apiserver

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
)

// table renders objects as the meta.k8s.io/v1 Table kubectl prints. Every
// column is produced, wide ones included; kubectl hides priority > 0
// columns unless -o wide. noHeaders leaves out the column definitions (watch
// events after the first).
func (s *Server) table(res *registry.Resource, objs []runtime.Object, include metav1.IncludeObjectPolicy, noHeaders bool) (*metav1.Table, error) {
	switch include {
	case "":
		include = metav1.IncludeMetadata
	case metav1.IncludeMetadata, metav1.IncludeObject, metav1.IncludeNone:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", include))
	}
	cols := res.Columns
	if cols == nil {
		cols = registry.DefaultColumns()
	}
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"}}
	if !noHeaders {
		for _, c := range cols {
			if !c.Undeclared {
				t.ColumnDefinitions = append(t.ColumnDefinitions, c.TableColumnDefinition)
			}
		}
	}
	t.Rows = make([]metav1.TableRow, 0, len(objs))
	for _, obj := range objs {
		row := metav1.TableRow{Cells: make([]interface{}, len(cols))}
		for i, c := range cols {
			row.Cells[i] = c.Cell(obj)
		}
		switch include {
		case metav1.IncludeMetadata:
			row.Object.Object = partialMetadata(obj)
		case metav1.IncludeObject:
			o := obj.DeepCopyObject()
			registry.SetKind(o)
			row.Object.Object = o
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}
