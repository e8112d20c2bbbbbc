package all

import (
	"strings"
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestFlowControlAndStorageMigrationRegister(t *testing.T) {
	set, err := registry.NewSet(append(flowcontrol(), storagemigration()...)...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: short names, categories, namespaced, status, generation, columns, etcd prefix
	want := map[string]string{
		"flowcontrol.apiserver.k8s.io/v1, Resource=flowschemas": "||false|true|true|" +
			"Name,PriorityLevel,MatchingPrecedence,DistinguisherMethod,Age,MissingPL|/registry/flowschemas/",
		"flowcontrol.apiserver.k8s.io/v1, Resource=prioritylevelconfigurations": "||false|true|true|" +
			"Name,Type,NominalConcurrencyShares,Queues,HandSize,QueueLengthLimit,Age|/registry/prioritylevelconfigurations/",
		"storagemigration.k8s.io/v1, Resource=storageversionmigrations": "||false|true|false|" +
			"Name,Resource,Status|/registry/storageversionmigrations/",
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		var columns []string
		for _, c := range r.Columns {
			columns = append(columns, c.Name)
		}
		got := strings.Join([]string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Namespaced), boolString(r.Status), boolString(r.Generation), strings.Join(columns, ","), r.Prefix()}, "|")
		if w, ok := want[gvr]; !ok || got != w {
			t.Errorf("%s: %s, want %q", gvr, got, w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}
