package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ReadNodes reaches each node's agent at nodes/NAME/proxy/proxy/frontends,
// sorts what they answer, keeps going past a node that fails, and asks for
// one Service's frontends when given one.
func TestReadNodesThroughNodesProxy(t *testing.T) {
	web := Frontend{Namespace: "default", Name: "web", Kind: KindClusterIP, Protocol: corev1.ProtocolTCP,
		Address: netip.MustParseAddrPort("10.96.100.10:80"), Backends: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.5:80")}}
	typo := Frontend{Namespace: "default", Name: "typo", Kind: KindClusterIP, Protocol: corev1.ProtocolTCP,
		Address: netip.MustParseAddrPort("10.96.7.7:80"), Reject: true}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}})
	})
	synced := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	mux.HandleFunc("GET /api/v1/nodes/n1/proxy/proxy/frontends", func(w http.ResponseWriter, r *http.Request) {
		list := FrontendList{Frontends: []Frontend{web, typo}, LastSync: synced}
		if s := r.URL.Query().Get("service"); s != "" {
			list.Frontends = slices.DeleteFunc(list.Frontends, func(f Frontend) bool { return f.Service() != s })
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /api/v1/nodes/n2/proxy/proxy/frontends", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "the node's Service proxy has not started yet"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadNodes(t.Context(), client, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Node != "n1" || got[1].Node != "n2" {
		t.Fatalf("nodes %+v", got)
	}
	if len(got[0].Frontends) != 2 || got[0].Frontends[0].String() != typo.String() || got[0].Frontends[1].String() != web.String() || !got[0].LastSync.Equal(synced) {
		t.Errorf("n1's frontends %v", got[0].Frontends)
	}
	if !strings.Contains(got[1].Error, "has not started yet") || len(got[1].Frontends) != 0 {
		t.Errorf("n2: %+v", got[1])
	}
	// One node only.
	if got, err := ReadNodes(t.Context(), client, "n1", ""); err != nil || len(got) != 1 || len(got[0].Frontends) != 2 {
		t.Errorf("--node n1: %+v, %v", got, err)
	}
	// One Service's.
	if got, err := ReadNodes(t.Context(), client, "n1", "default/typo"); err != nil || len(got) != 1 || len(got[0].Frontends) != 1 || got[0].Frontends[0].Name != "typo" {
		t.Errorf("default/typo on n1: %+v, %v", got, err)
	}
}
