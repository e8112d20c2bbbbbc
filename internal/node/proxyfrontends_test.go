package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/internal/proxy"
)

type fakeFrontends struct {
	list []proxy.Frontend
	err  error
}

func (f fakeFrontends) Frontends(context.Context) ([]proxy.Frontend, error) { return f.list, f.err }

func TestProxyFrontendsEndpoint(t *testing.T) {
	serve := func(r proxy.FrontendReader) *httptest.ResponseRecorder {
		srv := &server{agent: &Agent{cfg: Config{ProxyFrontends: r}}}
		rec := httptest.NewRecorder()
		srv.proxyFrontends(rec, httptest.NewRequest("GET", "/proxy/frontends", nil))
		return rec
	}
	web := proxy.Frontend{Namespace: "default", Name: "web", Kind: proxy.KindClusterIP, Protocol: "TCP",
		Address: netip.MustParseAddrPort("10.96.0.11:80"), Backends: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.5:8080")}}
	rec := serve(fakeFrontends{list: []proxy.Frontend{web}})
	var got proxy.FrontendList
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || len(got.Frontends) != 1 || got.Frontends[0].String() != web.String() {
		t.Errorf("answer %d %s (%v)", rec.Code, rec.Body, err)
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
