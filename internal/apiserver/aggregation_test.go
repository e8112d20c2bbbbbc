package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	discoveryclient "k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// stubAggregator serves wardle.example.com/v1alpha1 as an extension
// server would.
type stubAggregator struct{}

func (stubAggregator) ServeHTTP(w http.ResponseWriter, r *http.Request, _ user.Info) bool {
	if r.URL.Path != "/apis/wardle.example.com/v1alpha1" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "wardle.example.com/v1alpha1", APIResources: []metav1.APIResource{{Name: "flunders", Namespaced: true, Kind: "Flunder", Verbs: []string{"list"}}}})
	return true
}

func (stubAggregator) Groups() []apidiscoveryv2.APIGroupDiscovery {
	return []apidiscoveryv2.APIGroupDiscovery{{ObjectMeta: metav1.ObjectMeta{Name: "wardle.example.com"}, Versions: []apidiscoveryv2.APIVersionDiscovery{{
		Version: "v1alpha1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: "flunders", Scope: apidiscoveryv2.ScopeNamespace,
			ResponseKind: &metav1.GroupVersionKind{Kind: "Flunder"}, Verbs: []string{"list"}}},
	}}}}
}

// Aggregated group versions join discovery, plain and aggregated, and
// their paths go to the aggregator.
func TestAggregatedDiscovery(t *testing.T) {
	s, url := startTestServer(t)
	s.aggregator = stubAggregator{}
	for _, legacy := range []bool{false, true} {
		dc, err := discoveryclient.NewDiscoveryClientForConfig(&rest.Config{Host: url})
		if err != nil {
			t.Fatal(err)
		}
		dc.UseLegacyDiscovery = legacy
		resources, err := dc.ServerPreferredNamespacedResources()
		if err != nil {
			t.Fatalf("legacy=%v: %v", legacy, err)
		}
		gvrs, err := discoveryclient.GroupVersionResources(resources)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := gvrs[schema.GroupVersionResource{Group: "wardle.example.com", Version: "v1alpha1", Resource: "flunders"}]; !ok {
			t.Errorf("legacy=%v: flunders not discovered among %v", legacy, gvrs)
		}
		if _, ok := gvrs[schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}]; !ok {
			t.Errorf("legacy=%v: the server's own resources are gone: %v", legacy, gvrs)
		}
	}
	resp, err := http.Get(url + "/apis/wardle.example.com")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var group metav1.APIGroup
	if err := json.NewDecoder(resp.Body).Decode(&group); err != nil || group.Name != "wardle.example.com" || group.PreferredVersion.GroupVersion != "wardle.example.com/v1alpha1" {
		t.Errorf("/apis/wardle.example.com = %+v (%v)", group, err)
	}
}
