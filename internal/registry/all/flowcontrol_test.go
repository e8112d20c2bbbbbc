package all

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestFlowControlAndStorageMigrationRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation, columns, etcd prefix
	want := map[string]string{
		"flowcontrol.apiserver.k8s.io/v1, Resource=flowschemas": "||false|true|true|" +
			"Name,PriorityLevel,MatchingPrecedence,DistinguisherMethod,Age,MissingPL|/registry/flowschemas/",
		"flowcontrol.apiserver.k8s.io/v1, Resource=prioritylevelconfigurations": "||false|true|true|" +
			"Name,Type,NominalConcurrencyShares,Queues,HandSize,QueueLengthLimit,Age|/registry/prioritylevelconfigurations/",
		"storagemigration.k8s.io/v1, Resource=storageversionmigrations": "||false|true|false|" +
			"Name,Resource,Status|/registry/storageversionmigrations/",
	}
	checkRegistered(t, append(flowcontrol(), storagemigration()...), want, (*registry.Resource).Prefix)
}
