package all

import "testing"

func TestAPIRegistrationRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"apiregistration.k8s.io/v1, Resource=apiservices": "|api-extensions|false|true|false|Name,Service,Available,Age",
	}
	checkRegistered(t, apiregistration(), want)
	for _, r := range apiregistration() {
		if p := r.Prefix(); p != "/registry/apiregistration.k8s.io/apiservices/" {
			t.Errorf("%s: stored under %s", r.GroupVersionResource(), p)
		}
	}
}
