package all

import (
	"testing"

	"github.com/svcnet/svcnet/internal/registry"
)

func TestStorageRegister(t *testing.T) {
	var storage []*registry.Resource
	for _, r := range groups(Deps{}) {
		if r.Kind.Group == "storage.k8s.io" {
			storage = append(storage, r)
		}
	}
	// resource: short names, categories, namespaced, status, generation,
	// columns
	want := map[string]string{
		"storage.k8s.io/v1, Resource=storageclasses": "sc||false|false|false|Name,Provisioner,ReclaimPolicy,VolumeBindingMode,AllowVolumeExpansion,Age",
		"storage.k8s.io/v1, Resource=csinodes":       "||false|true|false|Name,Drivers,Age",
	}
	checkRegistered(t, storage, want)
}
