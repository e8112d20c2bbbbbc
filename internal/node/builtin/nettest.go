package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nettest is agnhost nettest: an HTTP server that records which peers
// wrote to it (/write, /read, /status, /quit) while it writes, in the
// background, to every endpoint of --service, as upstream's command. The
// cluster is reached with the pod's in-cluster credentials; as upstream,
// the command fails when it has none, or when the API server does not
// answer within the peer timeout.
func nettest(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nettest", flag.ContinueOnError)
	port := fs.Int("port", 8080, "Port number to serve at.")
	peers := fs.Int("peers", 8, "Must find at least this many peers for the test to pass.")
	service := fs.String("service", "nettest", "Service to find other network test pods in.")
	namespace := fs.String("namespace", "default", "Namespace of this pod.")
	delay := fs.Int("delay-shutdown", 0, "Number of seconds to delay shutdown when receiving SIGTERM.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("accepts at most 0 arg(s), received %d", fs.NArg())
	}
	if *service == "" {
		return errors.New("must provide --service flag")
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("error getting hostname: %w", err)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("unable to create config: %w", err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("unable to create client: %w", err)
	}
	n := newNettester(host, *namespace, *service, *peers)
	// Serving ends on SIGTERM (after --delay-shutdown) or when the API
	// server cannot be reached; /quit exits at once.
	sctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	go func() {
		select {
		case <-ctx.Done():
			if *delay > 0 {
				slog.Info("agnhost nettest: sleeping before exit", "seconds", *delay)
				time.Sleep(time.Duration(*delay) * time.Second)
			}
			stop(nil)
		case <-sctx.Done():
		}
	}()
	go func() {
		if err := n.contactPeers(sctx, client); err != nil {
			stop(err)
		}
	}()
	if err := serve(sctx, []int{*port}, n.handler(func() { os.Exit(0) })); err != nil {
		return err
	}
	if cause := context.Cause(sctx); !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// nettestState is what /read shows, as upstream's JSON has it.
type nettestState struct {
	Hostname             string
	Sent                 map[string]int
	Received             map[string]int
	Errors               []string
	Log                  []string
	StillContactingPeers bool
}

// nettestWrite is the body of a POST to /write.
type nettestWrite struct {
	Source string
	Dest   string
}

// nettestWriteAnswer is what /write answers.
type nettestWriteAnswer struct {
	Hostname string
}

// nettestMaxLog is how many messages the state's Log keeps.
const nettestMaxLog = 500

// nettester is one nettest server: its state and the peers it looks for.
type nettester struct {
	namespace, service string
	peers              int
	// pause is the wait between rounds of the peer loop, timeout how
	// long it waits for the API server, then for the peers' endpoints.
	pause, timeout time.Duration

	mu    sync.Mutex
	state nettestState
}

// newNettester is the server of host, which looks for peers endpoints in
// namespace/service, pacing its requests to the API server as upstream
// does for large clusters.
func newNettester(host, namespace, service string, peers int) *nettester {
	return &nettester{
		namespace: namespace,
		service:   service,
		peers:     peers,
		pause:     max(5*time.Second, time.Duration(peers/10)*time.Second),
		timeout:   max(5*time.Minute, time.Duration(peers)*time.Second),
		state:     nettestState{Hostname: host, StillContactingPeers: true},
	}
}

// handler serves nettest's endpoints; /quit calls quit.
func (n *nettester) handler(quit func()) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/quit", func(http.ResponseWriter, *http.Request) { quit() })
	mux.HandleFunc("/read", n.serveRead)
	mux.HandleFunc("/write", n.serveWrite)
	mux.HandleFunc("/status", n.serveStatus)
	return mux
}

// serveStatus answers pass, running or fail.
func (n *nettester) serveStatus(w http.ResponseWriter, _ *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case len(n.state.Sent) >= n.peers && len(n.state.Received) >= n.peers:
		fmt.Fprint(w, "pass")
	case n.state.StillContactingPeers:
		fmt.Fprint(w, "running")
	default:
		n.logLocked(fmt.Sprintf("Declaring failure for %s/%s with %d sent and %d received and %d peers",
			n.namespace, n.service, len(n.state.Sent), len(n.state.Received), n.peers))
		fmt.Fprint(w, "fail")
	}
}

// serveRead answers the state, whatever the method.
func (n *nettester) serveRead(w http.ResponseWriter, _ *http.Request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	b, err := json.MarshalIndent(&n.state, "", "\t")
	n.errorLocked(err)
	_, err = w.Write(b)
	n.errorLocked(err)
}

// serveWrite counts a write from the body's Source. As upstream, it
// answers 200 whatever the request: a body it cannot decode, or one
// naming no source, only adds to the state's Errors.
func (n *nettester) serveWrite(w http.ResponseWriter, r *http.Request) {
	defer r.Body.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	var wr nettestWrite
	n.errorLocked(json.NewDecoder(r.Body).Decode(&wr))
	if wr.Source == "" {
		n.errorLocked(fmt.Errorf("%v: Got request with no source", n.state.Hostname))
	} else {
		if n.state.Received == nil {
			n.state.Received = map[string]int{}
		}
		n.state.Received[wr.Source]++
	}
	n.errorLocked(json.NewEncoder(w).Encode(&nettestWriteAnswer{Hostname: n.state.Hostname}))
}

// errorLocked adds err, if any, to the state's Errors; n.mu is held.
func (n *nettester) errorLocked(err error) {
	if err != nil {
		n.state.Errors = append(n.state.Errors, err.Error())
	}
}

// logLocked adds msg to the state's Log, dropping the oldest beyond
// nettestMaxLog; n.mu is held.
func (n *nettester) logLocked(msg string) {
	n.state.Log = append(n.state.Log, msg)
	if len(n.state.Log) > nettestMaxLog {
		n.state.Log = n.state.Log[1:]
	}
}

// logf adds a message to the state's Log.
func (n *nettester) logf(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logLocked(fmt.Sprintf(format, args...))
}

// contactPeers checks that client reaches the API server, waits for the
// service to have --peers endpoints, then writes to each endpoint, in
// fifteen rounds to catch late ones; StillContactingPeers is false once
// it returns. It fails only when the API server stays unreachable.
func (n *nettester) contactPeers(ctx context.Context, client kubernetes.Interface) error {
	defer func() {
		n.mu.Lock()
		n.state.StillContactingPeers = false
		n.mu.Unlock()
	}()
	var err error
	for start := time.Now(); time.Since(start) < n.timeout; {
		v, verr := discovery.ToServerVersionInterfaceWithContext(client.Discovery()).ServerVersionWithContext(ctx)
		if err = verr; err == nil {
			slog.Info("agnhost nettest: server version", "version", v.GitVersion)
			break
		}
		slog.Info("agnhost nettest: unable to get server version; retrying", "err", err)
		if !sleepCtx(ctx, n.pause+time.Second) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("unable to contact Kubernetes: %w", err)
	}
	for start := time.Now(); time.Since(start) < n.timeout; {
		eps := n.endpoints(ctx, client)
		if len(eps) >= n.peers {
			break
		}
		n.logf("%v/%v has %v endpoints (%v), which is less than %v as expected. Waiting for all endpoints to come up.",
			n.namespace, n.service, len(eps), eps, n.peers)
		if !sleepCtx(ctx, n.pause) {
			return nil
		}
	}
	for range 15 {
		for _, ep := range n.endpoints(ctx, client) {
			n.logf("Attempting to contact %s", ep)
			n.contact(ctx, ep)
		}
		if !sleepCtx(ctx, n.pause) {
			return nil
		}
	}
	return nil
}

// endpoints are the service's endpoints as sorted, distinct
// http://ip:port URLs.
func (n *nettester) endpoints(ctx context.Context, client kubernetes.Interface) []string {
	ep, err := client.CoreV1().Endpoints(n.namespace).Get(ctx, n.service, metav1.GetOptions{})
	if err != nil {
		n.logf("Unable to read the endpoints for %v/%v: %v.", n.namespace, n.service, err)
		return nil
	}
	var urls []string
	for _, ss := range ep.Subsets {
		for _, a := range ss.Addresses {
			for _, p := range ss.Ports {
				urls = append(urls, "http://"+net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	slices.Sort(urls)
	return slices.Compact(urls)
}

// contact posts this server's hostname to the /write of the peer at url
// and counts a send to the hostname the peer answers.
func (n *nettester) contact(ctx context.Context, url string) {
	body, _ := json.Marshal(&nettestWrite{Source: n.state.Hostname, Dest: url}) // strings only: no error
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/write", bytes.NewReader(body))
	if err != nil {
		n.logf("Warning: unable to contact the endpoint %q: %v", url, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.logf("Warning: unable to contact the endpoint %q: %v", url, err)
		return
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		n.logf("Warning: unable to read response from '%v': '%v'", url, err)
		return
	}
	var answer nettestWriteAnswer
	if err := json.Unmarshal(body, &answer); err != nil {
		n.logf("Warning: unable to unmarshal response (%v) from '%v': '%v'", string(body), url, err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state.Sent == nil {
		n.state.Sent = map[string]int{}
	}
	n.state.Sent[answer.Hostname]++
}

// sleepCtx waits d, false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
