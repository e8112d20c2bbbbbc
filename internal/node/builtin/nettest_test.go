package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// nettestGet asks srv for path with method and body, and returns the
// answer's status and body.
func nettestGet(t *testing.T, srv *httptest.Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// nettestRead decodes srv's /read.
func nettestRead(t *testing.T, srv *httptest.Server) nettestState {
	t.Helper()
	code, body := nettestGet(t, srv, http.MethodGet, "/read", "")
	if code != http.StatusOK {
		t.Fatalf("/read: %d %s", code, body)
	}
	var st nettestState
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/read %q: %v", body, err)
	}
	return st
}

// TestNettestHandler: the prestop hook's write shows in /read; as
// upstream, /write answers 200 to any method and body, recording what it
// could not use in Errors; /status says running, then fail once the peer
// loop is done; /quit quits.
func TestNettestHandler(t *testing.T) {
	n := newNettester("server", "ns", "nettest", 1)
	quit := make(chan struct{}, 1)
	srv := httptest.NewServer(n.handler(func() { quit <- struct{}{} }))
	defer srv.Close()

	code, body := nettestGet(t, srv, http.MethodPost, "/write", `{"Source":"prestop"}`)
	if code != http.StatusOK || body != "{\"Hostname\":\"server\"}\n" {
		t.Errorf("/write: %d %q", code, body)
	}
	for _, c := range []struct{ method, body string }{
		{http.MethodGet, ""},
		{http.MethodPost, "not json"},
		{http.MethodPut, `{"Dest":"x"}`},
	} {
		if code, body := nettestGet(t, srv, c.method, "/write", c.body); code != http.StatusOK || body != "{\"Hostname\":\"server\"}\n" {
			t.Errorf("%s /write %q: %d %q", c.method, c.body, code, body)
		}
	}
	st := nettestRead(t, srv)
	if st.Hostname != "server" || st.Received["prestop"] != 1 || len(st.Received) != 1 || !st.StillContactingPeers {
		t.Errorf("state: %+v", st)
	}
	wantErrors := []string{
		"EOF", "server: Got request with no source",
		"invalid character 'o' in literal null (expecting 'u')", "server: Got request with no source",
		"server: Got request with no source",
	}
	if strings.Join(st.Errors, "|") != strings.Join(wantErrors, "|") {
		t.Errorf("errors: %q, want %q", st.Errors, wantErrors)
	}
	if code, _ := nettestGet(t, srv, http.MethodGet, "/read/", ""); code != http.StatusNotFound {
		t.Errorf("/read/: %d", code)
	}

	if code, body := nettestGet(t, srv, http.MethodGet, "/status", ""); code != http.StatusOK || body != "running" {
		t.Errorf("/status while contacting peers: %d %q", code, body)
	}
	n.mu.Lock()
	n.state.StillContactingPeers = false
	n.mu.Unlock()
	if _, body := nettestGet(t, srv, http.MethodGet, "/status", ""); body != "fail" {
		t.Errorf("/status with no sends: %q", body)
	}
	if st := nettestRead(t, srv); len(st.Log) != 1 || st.Log[0] != "Declaring failure for ns/nettest with 0 sent and 1 received and 1 peers" {
		t.Errorf("log: %q", st.Log)
	}

	nettestGet(t, srv, http.MethodPost, "/quit", "")
	select {
	case <-quit:
	default:
		t.Error("/quit did not quit")
	}
}

// TestNettestPeers: two servers, each the service's endpoint, write to
// both in every round and pass; with no endpoints the loop logs why it
// waits and ends failing; an API server that does not answer is fatal.
func TestNettestPeers(t *testing.T) {
	ctx := context.Background()
	fast := func(n *nettester) *nettester {
		n.pause, n.timeout = time.Millisecond, 50*time.Millisecond
		return n
	}
	var ns []*nettester
	var srvs []*httptest.Server
	subset := corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}}}
	for _, host := range []string{"a", "b"} {
		n := fast(newNettester(host, "ns", "nettest", 2))
		srv := httptest.NewServer(n.handler(func() { t.Error("quit") }))
		defer srv.Close()
		u, err := url.Parse(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(u.Port())
		if err != nil {
			t.Fatal(err)
		}
		subset.Ports = append(subset.Ports, corev1.EndpointPort{Port: int32(p)})
		ns, srvs = append(ns, n), append(srvs, srv)
	}
	// The subset twice: each server is contacted once a round.
	client := fake.NewClientset(&corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nettest"},
		Subsets:    []corev1.EndpointSubset{subset, subset},
	})
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Go(func() {
			if err := n.contactPeers(ctx, client); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, srv := range srvs {
		st := nettestRead(t, srv)
		if st.StillContactingPeers || st.Sent["a"] != 15 || st.Sent["b"] != 15 || len(st.Sent) != 2 ||
			st.Received["a"] != 15 || st.Received["b"] != 15 || len(st.Received) != 2 {
			t.Errorf("server %d: sent %v, received %v, still contacting %v", i, st.Sent, st.Received, st.StillContactingPeers)
		}
		if len(st.Log) != 2*15 {
			t.Errorf("server %d: log %q, want an attempt for each endpoint in 15 rounds", i, st.Log)
		}
		if _, body := nettestGet(t, srv, http.MethodGet, "/status", ""); body != "pass" {
			t.Errorf("server %d /status: %q", i, body)
		}
	}

	lonely := fast(newNettester("c", "ns", "missing", 2))
	if err := lonely.contactPeers(ctx, client); err != nil {
		t.Fatal(err)
	}
	if lonely.state.StillContactingPeers || lonely.state.Sent != nil ||
		!strings.HasPrefix(lonely.state.Log[0], "Unable to read the endpoints for ns/missing: ") ||
		lonely.state.Log[1] != "ns/missing has 0 endpoints ([]), which is less than 2 as expected. Waiting for all endpoints to come up." {
		t.Errorf("no endpoints: %+v", lonely.state)
	}

	down := fake.NewClientset()
	down.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	unreachable := fast(newNettester("d", "ns", "nettest", 2))
	if err := unreachable.contactPeers(ctx, down); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("API server down: %v", err)
	}
	if unreachable.state.StillContactingPeers {
		t.Error("still contacting peers after giving up")
	}
}
