// Package ingressbench measures the Ingress controller's L7 proxy in the
// benchmark's own process, on loopback: requests per second and p99
// latency of small GETs over N concurrent keep-alive connections through
// the proxy against straight to the backend (the ratio is the figure to
// track), the two taking turns each round; and the time from an Ingress
// update (through a real API server on embedded etcd, watched by the
// controller's informers) until the proxy serves the new route.
//
// EndpointSlices may not hold loopback addresses, and the benchmark sends
// nothing anywhere else, so the two parts use two proxies: the load goes
// through a proxy given the table the controller would build for one
// Ingress whose Service's endpoint is the loopback backend; the updates
// go to a proxy fed by the controller, whose Service has no endpoints, so
// a new path is served once it answers 503 (its route, no endpoint)
// instead of 404 (no route).
//
// With -nginx, nginx configured as ingress-nginx configures an Ingress
// path is loaded in the same rounds: upstream's controller as the
// baseline of the proxy's own figures.
//
// By default the load generator, the proxy and the backend share the
// machine's CPUs. When they are the limit, a proxy's work per request (a
// server's and a client's, twice the socket reads and writes) about
// equals that of the load generator and the backend together, which
// bounds the ratio to direct near 0.5 for any proxy, nginx included.
// With ProxyCPUs the proxy runs in a process of its own on CPUs of its
// own, and nginx's workers on the same CPUs, as an Ingress controller
// runs on its own node: the load generator and the backend keep the
// other CPUs, so the ratio says how much of their rate a proxy with as
// many cores as they have carries.
package ingressbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/proxy"
	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// Options size the run.
type Options struct {
	// Conns is the number of concurrent keep-alive connections.
	Conns int
	// Round is how long each of the two targets is loaded per round.
	Round  time.Duration
	Rounds int
	// Changes is how many Ingress updates are timed.
	Changes int
	// Nginx is the path of an nginx binary to load in the same rounds,
	// configured as ingress-nginx configures an Ingress path: upstream's
	// Ingress controller as the baseline. Empty: not measured.
	Nginx string
	// ProxyCPUs, when not 0, gives the proxy (and nginx's workers) that
	// many CPUs of their own, the load generator and the backend the
	// others: the proxy runs in a process of its own (see Child).
	ProxyCPUs int
}

// Result is what the run measured.
type Result struct {
	Conns int
	// LoadCPUs and ProxyCPUs are the CPUs given to the load generator
	// with the backend, and to the proxy; both empty: all share all.
	LoadCPUs, ProxyCPUs []int
	DirectRPS, ProxyRPS float64
	DirectP99, ProxyP99 time.Duration
	DirectP50, ProxyP50 time.Duration
	// Nginx* are zero when nginx was not measured.
	NginxRPS             float64
	NginxP50, NginxP99   time.Duration
	ChangeP50, ChangeP99 time.Duration
	Changes              int
}

// Print writes the figures.
func (r *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(r.ProxyCPUs) > 0 {
		fmt.Fprintf(tw, "CPUs: load generator and backend %v, proxy and nginx %v\n", r.LoadCPUs, r.ProxyCPUs)
	} else {
		fmt.Fprintf(tw, "CPUs: all shared by the load generator, the backend and the proxy\n")
	}
	fmt.Fprintf(tw, "%d keep-alive connections\treq/s\tp50\tp99\n", r.Conns)
	fmt.Fprintf(tw, "straight to the backend\t%.0f\t%s\t%s\n", r.DirectRPS, r.DirectP50, r.DirectP99)
	fmt.Fprintf(tw, "through the ingress proxy\t%.0f\t%s\t%s\n", r.ProxyRPS, r.ProxyP50, r.ProxyP99)
	if r.NginxRPS > 0 {
		fmt.Fprintf(tw, "through nginx as ingress-nginx sets it\t%.0f\t%s\t%s\n", r.NginxRPS, r.NginxP50, r.NginxP99)
	}
	fmt.Fprintf(tw, "ratio proxy/direct\t%.2f\t\t%.2f (latency, direct/proxy)\n", r.ProxyRPS/r.DirectRPS, float64(r.DirectP99)/float64(r.ProxyP99))
	if r.NginxRPS > 0 {
		fmt.Fprintf(tw, "ratio nginx/direct\t%.2f\t\t%.2f (latency, direct/nginx)\n", r.NginxRPS/r.DirectRPS, float64(r.DirectP99)/float64(r.NginxP99))
		fmt.Fprintf(tw, "ratio proxy/nginx\t%.2f\t\t%.2f (latency, nginx/proxy)\n", r.ProxyRPS/r.NginxRPS, float64(r.NginxP99)/float64(r.ProxyP99))
	} else {
		fmt.Fprintf(tw, "nginx not measured (no -nginx)\n")
	}
	fmt.Fprintf(tw, "Ingress update to served (%d changes)\t\tp50 %s\tp99 %s\n", r.Changes, r.ChangeP50, r.ChangeP99)
	tw.Flush()
}

// Run measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	addr, stopBackend, err := backend()
	if err != nil {
		return nil, err
	}
	defer stopBackend()
	// Started first, stopped last: the controller stops before it.
	api, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer api.Stop()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	errc := make(chan error, 3)
	serve := func(p *proxy.Proxy) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- p.Serve(ctx, time.Second, proxy.Listener{Name: controller.HTTP, Listener: ln, Port: 80})
		}()
		return "http://" + ln.Addr().String(), nil
	}

	res := &Result{Conns: o.Conns, Changes: o.Changes}
	var loadedURL string
	if o.ProxyCPUs > 0 {
		if res.LoadCPUs, res.ProxyCPUs, err = cpuSplit(o.ProxyCPUs); err != nil {
			return nil, err
		}
		url, stop, err := startChild(ctx, addr, res.ProxyCPUs)
		if err != nil {
			return nil, err
		}
		defer stop()
		loadedURL = url
		unpin, err := pinSelf(res.LoadCPUs)
		if err != nil {
			return nil, err
		}
		defer unpin()
	} else {
		loaded := proxy.New(nil)
		loaded.Swap(loopbackTable(netip.MustParseAddrPort(addr)))
		if loadedURL, err = serve(loaded); err != nil {
			return nil, err
		}
	}
	var direct, proxied, nginx load
	type target struct {
		url string
		l   *load
	}
	targets := []target{{"http://" + addr + "/bench", &direct}, {loadedURL + "/bench", &proxied}}
	if o.Nginx != "" {
		nginxURL, stopNginx, err := startNginx(ctx, o.Nginx, addr, res.ProxyCPUs)
		if err != nil {
			return nil, err
		}
		defer stopNginx()
		targets = append(targets, target{nginxURL + "/bench", &nginx})
	}
	for range o.Rounds {
		for _, t := range targets {
			if err := t.l.run(ctx, t.url, o.Conns, o.Round); err != nil {
				return nil, err
			}
		}
	}
	res.DirectRPS, res.DirectP50, res.DirectP99 = direct.figures()
	res.ProxyRPS, res.ProxyP50, res.ProxyP99 = proxied.figures()
	if o.Nginx != "" {
		res.NginxRPS, res.NginxP50, res.NginxP99 = nginx.figures()
	}

	if err := objects(ctx, api.Client); err != nil {
		return nil, err
	}
	fed := proxy.New(nil)
	fedURL, err := serve(fed)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		errc <- controller.Run(ctx, controller.Config{Client: api.Client, Swap: fed.Swap, IngressClass: "svcnet",
			Ready: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-errc:
		return nil, fmt.Errorf("ingress controller: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := waitStatus(ctx, fedURL+"/v0", http.StatusServiceUnavailable); err != nil {
		return nil, err
	}
	var changes []time.Duration
	for i := range o.Changes {
		path := "/v" + strconv.Itoa(i+1)
		start := time.Now()
		if err := setPath(ctx, api.Client, path); err != nil {
			return nil, err
		}
		if err := waitStatus(ctx, fedURL+path, http.StatusServiceUnavailable); err != nil {
			return nil, err
		}
		changes = append(changes, time.Since(start))
	}
	res.ChangeP50, res.ChangeP99 = percentile(changes, 0.5), percentile(changes, 0.99)
	return res, nil
}

// loopbackTable is what the controller builds for an Ingress routing
// /bench to a Service whose one endpoint is ep.
func loopbackTable(ep netip.AddrPort) *routes.Table {
	l := &routes.Listener{Hosts: []*routes.VirtualHost{{Routes: []*routes.Route{{
		Source:   routes.Source{Kind: "Ingress", Namespace: "default", Name: "bench"},
		Matches:  []routes.Match{{Path: routes.PathMatch{Type: routes.PathPrefix, Value: "/bench"}}},
		Backends: []*routes.Backend{{Namespace: "default", Service: "bench", Weight: 1, Endpoints: []netip.AddrPort{ep}}},
	}}}}}
	return &routes.Table{Listeners: map[string]*routes.Listener{controller.HTTP: l}}
}

// backend serves a small answer on loopback.
func backend() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	body := []byte("hello from the backend\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// objects are the IngressClass, a Service without endpoints and the
// Ingress routing its path /v0.
func objects(ctx context.Context, c kubernetes.Interface) error {
	_, err := c.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "svcnet"}, Spec: networkingv1.IngressClassSpec{Controller: controller.ControllerName}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the IngressClass: %w", err)
	}
	_, err = c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the Service: %w", err)
	}
	_, err = c.NetworkingV1().Ingresses("default").Create(ctx, ingress("/v0"), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create the Ingress: %w", err)
	}
	return nil
}

func ingress(path string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: networkingv1.IngressSpec{
		IngressClassName: ptr.To("svcnet"),
		Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: path, PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "bench",
					Port: networkingv1.ServiceBackendPort{Name: "http"}}}}},
		}}}},
	}}
}

func setPath(ctx context.Context, c kubernetes.Interface, path string) error {
	ing, err := c.NetworkingV1().Ingresses("default").Get(ctx, "bench", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get the Ingress: %w", err)
	}
	ing.Spec = ingress(path).Spec
	if _, err := c.NetworkingV1().Ingresses("default").Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update the Ingress: %w", err)
	}
	return nil
}

// waitStatus polls url over one keep-alive connection until it answers
// with status want.
func waitStatus(ctx context.Context, url string, want int) error {
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer %d within 30s", url, want)
}

// load accumulates the requests of a target over the rounds.
type load struct {
	requests  int
	elapsed   time.Duration
	latencies []time.Duration
}

// run GETs url over conns connections, each its own client with one
// keep-alive connection, for d.
func (l *load) run(ctx context.Context, url string, conns int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lat := make([][]time.Duration, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			for ctx.Err() == nil {
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				res, err := c.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if err != nil || res.StatusCode != http.StatusOK {
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("GET %s: %s %v", url, res.Status, err)
					}
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	l.elapsed += time.Since(start)
	for _, ls := range lat {
		l.requests += len(ls)
		l.latencies = append(l.latencies, ls...)
	}
	return errors.Join(errs...)
}

func (l *load) figures() (rps float64, p50, p99 time.Duration) {
	return float64(l.requests) / l.elapsed.Seconds(), percentile(l.latencies, 0.5), percentile(l.latencies, 0.99)
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
