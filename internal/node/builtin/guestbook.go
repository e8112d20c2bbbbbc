package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// The guestbook's Services, which its frontend reaches at --backend-port:
// the primary takes the writes, the replicas answer the reads.
const (
	guestbookPrimary = "agnhost-primary"
	guestbookReplica = "agnhost-replica"
)

// A replica tries to register with its primary every guestbookRetry; it
// gives up, and ends, after guestbookRegisterTimeout.
const (
	guestbookRegisterTimeout = 15 * time.Second
	guestbookRetry           = time.Second
)

// guestbookDial connects the guestbook to its peers: the primary, the
// replicas and, from the frontend, the backend Services.
var guestbookDial = (&net.Dialer{}).DialContext

// guestbook is agnhost's guestbook: a key-value store over HTTP that is
// the guestbook application's primary, its replica (--replicaof, which
// registers with the primary and is sent its writes) or its frontend
// (/guestbook, which sends writes to the agnhost-primary Service and reads
// to the agnhost-replica Service). Every role serves every endpoint.
func guestbook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("guestbook", flag.ContinueOnError)
	httpPort := fs.Int("http-port", 80, "HTTP listen port")
	backendPort := fs.String("backend-port", "6379", "the port of the primary, the replicas and the backend Services")
	replicaOf := fs.String("replicaof", "", "the primary's host name to register with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("agnhost guestbook takes no arguments, got %q", fs.Args())
	}
	g := &guestbookNode{
		backendPort: *backendPort,
		store:       map[string]string{},
		// A connection per request, as agnhost's: each request goes to
		// whichever endpoint the Service picks for it.
		client: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{DialContext: guestbookDial, DisableKeepAlives: true},
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/register", g.register)
	mux.HandleFunc("/get", g.get)
	mux.HandleFunc("/set", g.set)
	mux.HandleFunc("/guestbook", g.frontend)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	regErr := make(chan error, 1)
	if *replicaOf != "" {
		go func() {
			if err := g.registerWith(sctx, *replicaOf); err != nil {
				regErr <- err
				cancel()
			}
		}()
	}
	if err := serve(sctx, []int{*httpPort}, mux); err != nil {
		return err
	}
	select {
	case err := <-regErr:
		return err
	default:
		return nil
	}
}

// guestbookNode is one guestbook server's store and the replicas it sends
// its writes to.
type guestbookNode struct {
	backendPort string
	client      *http.Client

	// mu guards the store and the replicas, and orders the writes: each
	// reaches the replicas before the next is taken.
	mu       sync.Mutex
	store    map[string]string
	replicas []string
}

// registerWith registers this replica with primary, retrying for a
// while, and takes the primary's store.
func (g *guestbookNode) registerWith(ctx context.Context, primary string) error {
	hostPort := net.JoinHostPort(primary, g.backendPort)
	for deadline := time.Now().Add(guestbookRegisterTimeout); time.Now().Before(deadline); {
		body, err := g.registerOnce(ctx, hostPort)
		if err == nil {
			var answer struct {
				Data map[string]string `json:"data"`
			}
			if err := json.Unmarshal(body, &answer); err != nil || answer.Data == nil {
				return fmt.Errorf("primary %s answered the registration with %q: %v", hostPort, body, err)
			}
			g.mu.Lock()
			g.store = answer.Data
			g.mu.Unlock()
			log.Printf("Registered to node: %s", primary)
			return nil
		}
		log.Printf("%v. Retrying in %s.", err, guestbookRetry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(guestbookRetry):
		}
	}
	return errors.New("timed out while registering to primary")
}

// registerOnce asks the primary at hostPort to send its writes to this
// replica's address, the one it reaches the primary from.
func (g *guestbookNode) registerOnce(ctx context.Context, hostPort string) ([]byte, error) {
	conn, err := net.Dial("udp", hostPort)
	if err != nil {
		return nil, fmt.Errorf("unable to get IP %s: %w", hostPort, err)
	}
	ip := conn.LocalAddr().(*net.UDPAddr).IP.String()
	conn.Close()
	log.Printf("Registering to primary: %s/register?host=%s", hostPort, ip)
	body, err := g.call(ctx, hostPort, "register", url.Values{"host": {ip}})
	if err != nil {
		return nil, fmt.Errorf("encountered error while registering to primary: %w", err)
	}
	return body, nil
}

// call sends GET /path?query to the guestbook server at hostPort and
// returns its answer, whatever its status.
func (g *guestbookNode) call(ctx context.Context, hostPort, path string, query url.Values) ([]byte, error) {
	u := url.URL{Scheme: "http", Host: hostPort, Path: "/" + path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// register adds the caller (?host=) to the replicas and answers with the
// whole store, {"data": {...}}.
func (g *guestbookNode) register(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Query().Get("host")
	log.Printf("GET /register?host=%s", host)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !writeGuestbookJSON(w, map[string]any{"data": g.store}) {
		return
	}
	if !slices.Contains(g.replicas, host) {
		g.replicas = append(g.replicas, host)
	}
	log.Printf("Node '%s' registered.", host)
}

// get answers {"data": value} for ?key= (the empty string for a key not
// set), or the whole store without a key.
func (g *guestbookNode) get(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	log.Printf("GET /get?key=%s", key)
	g.mu.Lock()
	defer g.mu.Unlock()
	var data any = g.store
	if key != "" {
		data = g.store[key]
	}
	writeGuestbookJSON(w, map[string]any{"data": data})
}

// set stores ?key= and ?value=, sends the write to every replica and
// answers {"message": "Updated"}.
func (g *guestbookNode) set(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key, value := q.Get("key"), q.Get("value")
	log.Printf("GET /set?key=%s&value=%s", key, value)
	if key == "" {
		http.Error(w, "cannot set with empty key.", http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.store[key] = value
	for _, replica := range g.replicas {
		if _, err := g.call(r.Context(), net.JoinHostPort(replica, g.backendPort), "set", url.Values{"key": {key}, "value": {value}}); err != nil {
			http.Error(w, fmt.Sprintf("encountered error while propagating to replica '%s': %v", replica, err), http.StatusExpectationFailed)
			return
		}
	}
	writeGuestbookJSON(w, map[string]string{"message": "Updated"})
}

// frontend passes ?cmd=set on to the primary's /set and ?cmd=get to a
// replica's /get, with ?key= and ?value=, and answers with their answer.
func (g *guestbookNode) frontend(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd, key, value := strings.ToLower(q.Get("cmd")), q.Get("key"), q.Get("value")
	log.Printf("GET /guestbook?cmd=%s&key=%s&value=%s", cmd, key, value)
	host := guestbookReplica
	switch {
	case cmd == "set" && key == "":
		http.Error(w, "cannot set with empty key.", http.StatusBadRequest)
		return
	case cmd == "set":
		host = guestbookPrimary
	case cmd != "get":
		http.Error(w, fmt.Sprintf("unsupported cmd: '%s'", cmd), http.StatusBadRequest)
		return
	}
	body, err := g.call(r.Context(), net.JoinHostPort(host, g.backendPort), cmd, url.Values{"key": {key}, "value": {value}})
	var dnsErr *net.DNSError
	var addrErr *net.AddrError
	switch {
	case errors.As(err, &dnsErr) || errors.As(err, &addrErr):
		http.Error(w, fmt.Sprintf("host and/or port param are invalid. %v", err), http.StatusBadRequest)
	case err != nil:
		http.Error(w, fmt.Sprintf("encountered error: %v", err), http.StatusExpectationFailed)
	default:
		_, _ = w.Write(body)
	}
}

// writeGuestbookJSON answers v as JSON, as agnhost's guestbook does (no
// Content-Type of its own); false when v could not be encoded.
func writeGuestbookJSON(w http.ResponseWriter, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("response could not be serialized. %v", err), http.StatusExpectationFailed)
		return false
	}
	_, _ = w.Write(b)
	return true
}
