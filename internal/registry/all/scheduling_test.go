package all

import "testing"

func TestSchedulingRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"scheduling.k8s.io/v1, Resource=priorityclasses": "pc||false|false|false|Name,Value,Global-Default,Age,PreemptionPolicy",
	}
	checkRegistered(t, scheduling(), want)
}
