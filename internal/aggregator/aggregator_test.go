package aggregator

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/pki"
)

// extension is a stand-in extension API server: it serves the wardle
// group version's resource list and echoes the request header
// authentication it was sent, trusting only the front-proxy CA.
type extension struct {
	srv *httptest.Server
	ca  *pki.CA

	mu   sync.Mutex
	seen []*http.Request
}

func newExtension(t *testing.T, frontProxy *pki.CA) *extension {
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving(dir, "sample-api", []string{"sample-api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := serving.TLS()
	if err != nil {
		t.Fatal(err)
	}
	e := &extension{ca: ca}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.seen = append(e.seen, r)
		e.mu.Unlock()
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "front-proxy-client" {
			http.Error(w, "no front-proxy client certificate", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/apis/wardle.example.com/v1alpha1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "wardle.example.com/v1alpha1", APIResources: []metav1.APIResource{
				{Name: "flunders", SingularName: "flunder", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "list", "create"}},
				{Name: "flunders/status", Namespaced: true, Kind: "Flunder", Verbs: []string{"get", "update"}},
			}})
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"user": r.Header.Get("X-Remote-User"), "groups": r.Header.Values("X-Remote-Group"),
				"extra": r.Header.Get("X-Remote-Extra-Scopes"), "uid": r.Header.Get("X-Remote-Uid"), "path": r.URL.Path, "query": r.URL.RawQuery})
		}
	}))
	e.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: frontProxy.Pool()}
	e.srv.StartTLS()
	t.Cleanup(e.srv.Close)
	return e
}

// fixture is an aggregator over fake clients whose Dial reaches ext for
// wardle/sample-api:443.
type fixture struct {
	agg    *Aggregator
	client *aggregatorfake.Clientset
	kube   *fake.Clientset
	ext    *extension
}

func newFixture(t *testing.T, objects ...any) *fixture {
	dir := t.TempDir()
	fp, err := pki.LoadOrCreateNamedCA(dir, "front-proxy-ca", "front-proxy-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := fp.Client(dir, "front-proxy-client", "front-proxy-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	proxyCert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ext: newExtension(t, fp), client: aggregatorfake.NewSimpleClientset(), kube: fake.NewClientset()}
	for _, o := range objects {
		var err error
		switch o := o.(type) {
		case *corev1.Service:
			_, err = f.kube.CoreV1().Services(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = f.kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.agg, err = New(Config{Client: f.client, Kube: f.kube, ProxyClientCert: proxyCert, Metrics: controller.NewMetrics(prometheus.NewRegistry()),
		Dial: func(ctx context.Context, namespace, name string, port int32) (net.Conn, error) {
			if namespace != "wardle" || name != "sample-api" || port != 443 {
				t.Errorf("dial %s/%s:%d", namespace, name, port)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", f.ext.srv.Listener.Addr().String())
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.agg.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

func (f *fixture) createAPIService(t *testing.T, caBundle []byte) {
	t.Helper()
	_, err := f.client.ApiregistrationV1().APIServices().Create(context.Background(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", CABundle: caBundle,
			Service:              &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "sample-api", Port: ptr.To[int32](443)},
			GroupPriorityMinimum: 2000, VersionPriority: 200},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// waitAvailable waits for the APIService's Available condition to have
// reason, and returns it.
func (f *fixture) waitAvailable(t *testing.T, reason string) *apiregistrationv1.APIServiceCondition {
	t.Helper()
	var last *apiregistrationv1.APIServiceCondition
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := f.client.ApiregistrationV1().APIServices().Get(ctx, "v1alpha1.wardle.example.com", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = v1helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
		return last != nil && last.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("Available condition %+v, want reason %s", last, reason)
	}
	return last
}

func sampleService() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "wardle", Name: "sample-api"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 443}}}}
}

func sampleSlice(ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "wardle", Name: "sample-api-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "sample-api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](443)}},
	}
}

func TestAvailableConditions(t *testing.T) {
	t.Run("no Service", func(t *testing.T) {
		f := newFixture(t)
		f.createAPIService(t, nil)
		c := f.waitAvailable(t, "ServiceNotFound")
		if c.Status != apiregistrationv1.ConditionFalse || c.Message != `service/sample-api in "wardle" is not present` {
			t.Errorf("condition %+v", c)
		}
	})
	t.Run("no endpoints", func(t *testing.T) {
		f := newFixture(t, sampleService())
		f.createAPIService(t, nil)
		if c := f.waitAvailable(t, "EndpointsNotFound"); c.Message != `cannot find endpointslices for service/sample-api in "wardle"` {
			t.Errorf("condition %+v", c)
		}
		// The slice's arrival is checked at once.
		if _, err := f.kube.DiscoveryV1().EndpointSlices("wardle").Create(context.Background(), sampleSlice(false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if c := f.waitAvailable(t, "MissingEndpoints"); c.Message != `endpointslices for service/sample-api in "wardle" have no addresses with port name ""` {
			t.Errorf("condition %+v", c)
		}
	})
	t.Run("wrong port", func(t *testing.T) {
		svc := sampleService()
		svc.Spec.Ports[0].Port = 8443
		f := newFixture(t, svc)
		f.createAPIService(t, nil)
		if c := f.waitAvailable(t, "ServicePortError"); c.Message != `service/sample-api in "wardle" is not listening on port 443` {
			t.Errorf("condition %+v", c)
		}
	})
	t.Run("untrusted server", func(t *testing.T) {
		f := newFixture(t, sampleService(), sampleSlice(true))
		f.createAPIService(t, nil) // no caBundle: the system's roots, which do not sign it
		c := f.waitAvailable(t, "FailedDiscoveryCheck")
		if !strings.HasPrefix(c.Message, "failing or missing response from https://sample-api.wardle.svc:443/apis/wardle.example.com/v1alpha1: ") {
			t.Errorf("condition %+v", c)
		}
		rec := httptest.NewRecorder()
		if !f.agg.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/flunders", nil), &user.DefaultInfo{Name: "alice"}) {
			t.Fatal("not proxied")
		}
		if rec.Code != http.StatusServiceUnavailable || strings.TrimSpace(rec.Body.String()) != "service unavailable" {
			t.Errorf("unavailable APIService answered %d %q", rec.Code, rec.Body.String())
		}
	})
}

func TestProxyAndDiscovery(t *testing.T) {
	f := newFixture(t, sampleService(), sampleSlice(true))
	f.createAPIService(t, f.ext.ca.CertPEM)
	c := f.waitAvailable(t, "Passed")
	if c.Status != apiregistrationv1.ConditionTrue || c.Message != "all checks passed" {
		t.Fatalf("condition %+v", c)
	}
	// The discovery check went as system:kube-aggregator.
	f.ext.mu.Lock()
	first := f.ext.seen[0]
	f.ext.mu.Unlock()
	if first.Header.Get("X-Remote-User") != "system:kube-aggregator" || first.Header.Get("X-Remote-Group") != "system:masters" {
		t.Errorf("discovery check headers %v", first.Header)
	}

	groups := f.agg.Groups()
	if len(groups) != 1 || groups[0].Name != "wardle.example.com" || len(groups[0].Versions) != 1 {
		t.Fatalf("groups %+v", groups)
	}
	v := groups[0].Versions[0]
	if v.Version != "v1alpha1" || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent || len(v.Resources) != 1 ||
		v.Resources[0].Resource != "flunders" || v.Resources[0].Scope != apidiscoveryv2.ScopeNamespace ||
		len(v.Resources[0].Subresources) != 1 || v.Resources[0].Subresources[0].Subresource != "status" {
		t.Errorf("version discovery %+v", v)
	}

	req := httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders?limit=5", nil)
	req.Header.Set("X-Remote-User", "mallory") // a client's own header is replaced
	u := &user.DefaultInfo{Name: "alice", UID: "42", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"x"}}}
	rec := httptest.NewRecorder()
	if !f.agg.ServeHTTP(rec, req, u) {
		t.Fatal("not proxied")
	}
	var got struct {
		User, Extra, UID, Path, Query string
		Groups                        []string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	if got.User != "alice" || got.UID != "42" || strings.Join(got.Groups, ",") != "devs,system:authenticated" || got.Extra != "x" ||
		got.Path != "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders" || got.Query != "limit=5" {
		t.Errorf("extension server saw %+v", got)
	}

	// Paths of other group versions are not the aggregator's.
	for _, p := range []string{"/apis/wardle.example.com", "/apis/wardle.example.com/v1", "/api/v1/pods", "/apis"} {
		if f.agg.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil), u) {
			t.Errorf("%s proxied", p)
		}
	}

	// Deleting the APIService forgets it.
	if err := f.client.ApiregistrationV1().APIServices().Delete(context.Background(), "v1alpha1.wardle.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(f.agg.Groups()) == 0, nil
	}); err != nil {
		t.Errorf("groups after delete: %+v", f.agg.Groups())
	}
}

// The verification of the extension server goes by its Service's name.
func TestTransportServerName(t *testing.T) {
	a := &Aggregator{}
	tr, err := a.transport(&apiregistrationv1.APIServiceSpec{Service: &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "api"}, InsecureSkipTLSVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if tr.TLSClientConfig.ServerName != "api.ns.svc" || !tr.TLSClientConfig.InsecureSkipVerify || tr.TLSClientConfig.RootCAs != nil {
		t.Errorf("TLS config %+v", tr.TLSClientConfig)
	}
	if _, err := a.transport(&apiregistrationv1.APIServiceSpec{Service: &apiregistrationv1.ServiceReference{Namespace: "ns", Name: "api"}, CABundle: []byte("junk")}); err == nil {
		t.Error("a caBundle without certificates was taken")
	}
}
