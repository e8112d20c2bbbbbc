package serviceaccount

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestResource(t *testing.T) {
	r := Resource(nil)
	if r.Resource != "serviceaccounts" || strings.Join(r.ShortNames, ",") != "sa" || !r.Namespaced || r.Status {
		t.Fatalf("discovery = %+v", r)
	}
	if got := strings.Join(registrytest.Names(r.Columns), ","); got != "Name,Secrets,Age" {
		t.Fatalf("columns = %s", got)
	}
	sa := &corev1.ServiceAccount{Secrets: []corev1.ObjectReference{{Name: "a"}, {Name: "b"}}}
	if got := r.Columns[1].Cell(sa); got != int64(2) {
		t.Errorf("SECRETS = %v (%T)", got, got)
	}
}
