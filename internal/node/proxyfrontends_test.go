package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/internal/proxy"
)

type fakeFrontends struct {
	list   []proxy.Frontend
	synced time.Time
	err    error
}

func (f fakeFrontends) ListFrontends(_ context.Context, service string) (proxy.FrontendList, error) {
	var out []proxy.Frontend
	for _, fr := range f.list {
		if service == "" || fr.Service() == service {
			out = append(out, fr)
		}
	}
	return proxy.FrontendList{Frontends: out, LastSync: f.synced}, f.err
}

func TestProxyFrontendsEndpoint(t *testing.T) {
	serveQuery := func(r proxy.FrontendLister, query string) *httptest.ResponseRecorder {
		srv := &server{agent: &Agent{cfg: Config{ProxyFrontends: r}}}
		rec := httptest.NewRecorder()
		srv.proxyFrontends(rec, httptest.NewRequest("GET", "/proxy/frontends"+query, nil))
		return rec
	}
	serve := func(r proxy.FrontendLister) *httptest.ResponseRecorder { return serveQuery(r, "") }
	web := proxy.Frontend{Namespace: "default", Name: "web", Kind: proxy.KindClusterIP, Protocol: "TCP",
		Address: netip.MustParseAddrPort("10.96.0.11:80"), Backends: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.5:8080")}}
	dns := proxy.Frontend{Namespace: "kube-system", Name: "kube-dns", Kind: proxy.KindClusterIP, Protocol: "UDP",
		Address: netip.MustParseAddrPort("10.96.0.10:53"), Backends: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.2:53")}}
	synced := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	two := fakeFrontends{list: []proxy.Frontend{web, dns}, synced: synced}
	var got proxy.FrontendList
	rec := serve(two)
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || len(got.Frontends) != 2 || !got.LastSync.Equal(synced) {
		t.Errorf("answer %d %s (%v)", rec.Code, rec.Body, err)
	}
	// ?service= asks for one Service's frontends.
	got = proxy.FrontendList{}
	rec = serveQuery(two, "?service=default/web")
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || len(got.Frontends) != 1 || got.Frontends[0].String() != web.String() {
		t.Errorf("answer for default/web %d %s (%v)", rec.Code, rec.Body, err)
	}
	if rec := serve(fakeFrontends{}); rec.Body.String() != "{\"frontends\":[]}\n" {
		t.Errorf("no frontends: %s", rec.Body)
	}
	for _, c := range []struct {
		err  error
		code int
	}{{apierrors.NewServiceUnavailable("not yet"), http.StatusServiceUnavailable}, {errors.New("netlink"), http.StatusInternalServerError}} {
		if rec := serve(fakeFrontends{err: c.err}); rec.Code != c.code {
			t.Errorf("error %v: answer %d %s, want %d", c.err, rec.Code, rec.Body, c.code)
		}
	}
}
