package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// backend is an HTTP server on loopback that answers with its name and
// what it was asked, and streams slowly on /slow.
func backend(t *testing.T, name string) netip.AddrPort {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Upgrade") == "websocket":
			upgradeEcho(w, r)
		case strings.HasSuffix(r.URL.Path, "/slow"):
			for i := range 10 {
				fmt.Fprintf(w, "%s chunk %d\n", name, i)
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
		default:
			w.Header().Set("X-Backend", name)
			fmt.Fprintf(w, "%s %s host=%s xff=%s proto=%s fhost=%s realip=%s encoding=%s",
				name, r.URL.Path, r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"),
				r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Real-IP"), r.Header.Get("Accept-Encoding"))
		}
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String())
}

// upgradeEcho switches to a raw echo of what the client sends, as a
// WebSocket server would after its handshake.
func upgradeEcho(w http.ResponseWriter, r *http.Request) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	rw.Flush()
	line, _ := rw.ReadString('\n')
	fmt.Fprint(rw, "echo "+line)
	rw.Flush()
}

func route(name string, pathType routes.PathType, path string, backends ...*routes.Backend) *routes.Route {
	return &routes.Route{
		Source:   routes.Source{Kind: "Ingress", Namespace: "default", Name: name},
		Matches:  []routes.Match{{Path: routes.PathMatch{Type: pathType, Value: path}}},
		Backends: backends,
	}
}

func svc(name string, eps ...netip.AddrPort) *routes.Backend {
	return &routes.Backend{Namespace: "default", Service: name, Weight: 1, Endpoints: eps}
}

// start serves p on loopback: plain HTTP and TLS, as listeners "http"
// and "https".
func start(t *testing.T, p *Proxy) (httpURL, httpsAddr string) {
	t.Helper()
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Serve(ctx, time.Second,
			Listener{Name: "http", Listener: hl, Port: 80},
			Listener{Name: "https", Listener: sl, Port: 443, TLS: true})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + hl.Addr().String(), sl.Addr().String()
}

func get(t *testing.T, c *http.Client, url, host string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = host
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s (host %s): %v", url, host, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body), res.Header
}

func table(l *routes.Listener) *routes.Table {
	return &routes.Table{Listeners: map[string]*routes.Listener{"http": l, "https": l}}
}

func TestRouting(t *testing.T) {
	app, api := backend(t, "app"), backend(t, "api")
	reg := prometheus.NewRegistry()
	p := New(reg)
	p.Swap(table(&routes.Listener{Hosts: []*routes.VirtualHost{{
		Hostname: "web.example.test",
		Routes: []*routes.Route{
			route("web", routes.PathPrefix, "/app", svc("app", app)),
			route("web", routes.PathPrefix, "/api", svc("api", api)),
			route("web", routes.PathPrefix, "/empty", svc("empty")),
		},
	}}}))
	base, _ := start(t, p)
	// A client that asks for no encoding, whose requests the proxy passes
	// on as they are.
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}

	for _, tc := range []struct {
		host, path string
		status     int
		body       string
	}{
		{"web.example.test", "/app/x", 200, "app /app/x host=web.example.test xff=127.0.0.1 proto=http fhost=web.example.test realip=127.0.0.1 encoding=\n"},
		{"web.example.test:80", "/api", 200, "api /api host=web.example.test:80"},
		{"web.example.test", "/other", 404, "default backend - 404\n"},
		{"unknown.example.test", "/app", 404, "default backend - 404\n"},
		{"web.example.test", "/empty", 503, "503 Service Temporarily Unavailable\n"},
	} {
		status, body, _ := get(t, c, base+tc.path, tc.host)
		if status != tc.status || !strings.HasPrefix(body+"\n", tc.body) {
			t.Errorf("%s%s: %d %q, want %d %q", tc.host, tc.path, status, body, tc.status, tc.body)
		}
	}
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("default", "web", "app", "200")); n != 1 {
		t.Errorf("requests of app with 200: %v, want 1", n)
	}
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("", "", "", "404")); n != 2 {
		t.Errorf("404s by the default backend: %v, want 2", n)
	}
	if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues("default", "web", "empty", "503")); n != 1 {
		t.Errorf("503s of a backend without endpoints: %v, want 1", n)
	}
	if n := testutil.CollectAndCount(p.metrics.duration); n != 4 {
		t.Errorf("latency series: %d, want 4 (app, api, empty, default)", n)
	}
}

func TestFiltersAndDefault(t *testing.T) {
	app, fallback := backend(t, "app"), backend(t, "fallback")
	redirect := route("r", routes.PathPrefix, "/old")
	redirect.Filters = []routes.Filter{{Redirect: &routes.Redirect{Scheme: "https", StatusCode: 301}}}
	mod := route("m", routes.PathPrefix, "/mod", svc("app", app))
	mod.Filters = []routes.Filter{
		{Rewrite: &routes.Rewrite{Path: &routes.PathModifier{ReplacePrefixMatch: "/new"}}},
		{ResponseHeaders: &routes.HeaderModifier{Set: []routes.Header{{Name: "X-Backend", Value: "hidden"}}}},
	}
	p := New(nil)
	p.Swap(table(&routes.Listener{
		Hosts:   []*routes.VirtualHost{{Routes: []*routes.Route{redirect, mod}}},
		Default: &routes.Route{Backends: []*routes.Backend{svc("fallback", fallback)}},
	}))
	base, _ := start(t, p)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	req, _ := http.NewRequest("GET", base+"/old/x", nil)
	req.Host = "web.test"
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 301 || res.Header.Get("Location") != "https://web.test/old/x" {
		t.Errorf("redirect: %d to %s", res.StatusCode, res.Header.Get("Location"))
	}
	if _, body, h := get(t, c, base+"/mod/a", "web.test"); !strings.HasPrefix(body, "app /new/a") || h.Get("X-Backend") != "hidden" {
		t.Errorf("rewrite and response header: %q, X-Backend %q", body, h.Get("X-Backend"))
	}
	if status, body, _ := get(t, c, base+"/nothing", "web.test"); status != 200 || !strings.HasPrefix(body, "fallback /nothing") {
		t.Errorf("default backend: %d %q", status, body)
	}
}

// TestTLS checks the certificate chosen by SNI (a Secret's for its host,
// the self-signed default otherwise), HTTP/2 by ALPN and HTTP/1.1.
func TestTLS(t *testing.T) {
	app := backend(t, "app")
	def, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	web := testCertificate(t, "web.example.test")
	p := New(nil)
	p.Swap(table(&routes.Listener{
		Hosts:              []*routes.VirtualHost{{Hostname: "web.example.test", Routes: []*routes.Route{route("web", routes.PathPrefix, "/", svc("app", app))}}},
		Certificates:       []routes.Certificate{{Hosts: []string{"web.example.test"}, Cert: web}},
		DefaultCertificate: def,
	}))
	_, addr := start(t, p)

	for _, tc := range []struct {
		name, cn string
		h2       bool
	}{
		{"web.example.test", "web.example.test", true},
		{"web.example.test", "web.example.test", false},
		{"other.example.test", DefaultCertificateName, true},
	} {
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: tc.name, InsecureSkipVerify: true},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			},
			ForceAttemptHTTP2: tc.h2,
		}
		res, err := (&http.Client{Transport: tr}).Get("https://" + tc.name + "/x")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		tr.CloseIdleConnections()
		if cn := res.TLS.PeerCertificates[0].Subject.CommonName; cn != tc.cn {
			t.Errorf("%s: certificate %q, want %q", tc.name, cn, tc.cn)
		}
		if want := map[bool]int{true: 2, false: 1}[tc.h2]; res.ProtoMajor != want {
			t.Errorf("%s: HTTP/%d, want HTTP/%d", tc.name, res.ProtoMajor, want)
		}
		if tc.cn == tc.name && (res.StatusCode != 200 || !strings.Contains(string(body), "proto=https")) {
			t.Errorf("%s: %d %q, want the app with X-Forwarded-Proto https", tc.name, res.StatusCode, body)
		}
	}
}

func testCertificate(t *testing.T, host string) *tls.Certificate {
	t.Helper()
	c, err := selfSigned(host, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWebSocket upgrades a connection through the proxy and talks over it.
func TestWebSocket(t *testing.T) {
	p := New(nil)
	p.Swap(table(&routes.Listener{Hosts: []*routes.VirtualHost{{Routes: []*routes.Route{route("ws", routes.PathPrefix, "/", svc("ws", backend(t, "ws")))}}}}))
	base, _ := start(t, p)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /chat HTTP/1.1\r\nHost: web.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("upgrade answered %s %v", res.Status, res.Header)
	}
	fmt.Fprint(conn, "hello\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo hello\n" {
		t.Errorf("over the upgraded connection: %q %v", line, err)
	}
}

// TestSwapKeepsDownloads changes the table while a slow download runs:
// the download completes from the old backend, new requests go to the
// new one.
func TestSwapKeepsDownloads(t *testing.T) {
	old, next := backend(t, "old"), backend(t, "new")
	p := New(nil)
	p.Swap(table(&routes.Listener{Hosts: []*routes.VirtualHost{{Routes: []*routes.Route{route("w", routes.PathPrefix, "/", svc("old", old))}}}}))
	base, _ := start(t, p)

	res, err := http.Get(base + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if line, _ := br.ReadString('\n'); line != "old chunk 0\n" {
		t.Fatalf("download started with %q", line)
	}
	if n := testutil.ToFloat64(p.metrics.inFlight); n != 1 {
		t.Errorf("requests in flight during the download: %v, want 1", n)
	}
	p.Swap(table(&routes.Listener{Hosts: []*routes.VirtualHost{{Routes: []*routes.Route{route("w", routes.PathPrefix, "/", svc("new", next))}}}}))
	if _, body, _ := get(t, http.DefaultClient, base+"/x", "web.test"); !strings.HasPrefix(body, "new /x") {
		t.Errorf("after the swap: %q, want the new backend", body)
	}
	rest, err := io.ReadAll(br)
	if err != nil || strings.Count(string(rest), "old chunk") != 9 {
		t.Errorf("the rest of the download: %q %v, want old chunks 1-9", rest, err)
	}
}
