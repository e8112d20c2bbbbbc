// Package topobench measures the topology page's first render: an API
// server holding N Services (some with EndpointSlices of pods on a node),
// the page served by it through a proxy on loopback (as kubectl proxy
// serves it to a user), opened in headless Chromium; the time from
// navigation until the page has listed everything and drawn its lists
// (window.topologyFirstRenderMs). The baseline, measured in the same run
// by the same browser on the same origin, is the time only to fetch and
// parse the Services list in the pages the page asks for (500, then 2,500
// each); a client-go List in pages of 500 is printed beside it.
package topobench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/topology"
	"github.com/svcnet/svcnet/internal/topology/headless"
)

// Options size a run.
type Options struct {
	// Services is how many Services the API holds, spread over
	// Namespaces; every SliceEvery-th has an EndpointSlice of 3 pods
	// (one endpoint not ready).
	Services, Namespaces, SliceEvery int
	// Workers create the objects.
	Workers int
	// Rounds is how many times the page is opened afresh.
	Rounds int
}

// Result is one run's figures.
type Result struct {
	Options
	Slices, Pods int
	// FirstRender is each round's time from navigation to the page's
	// first full render; FetchOnly each round's time for the browser only
	// to fetch and parse the Services list; ClientGo each round's for a
	// client-go List of the same pages.
	FirstRender, FetchOnly, ClientGo []time.Duration
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// Print writes the medians and the ratio of the first render to the
// browser's bare fetch of the Services.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d Services in %d namespaces, %d EndpointSlices, %d pods; %d rounds (medians)\n",
		r.Services, r.Namespaces, r.Slices, r.Pods, r.Rounds)
	fr, fo := median(r.FirstRender), median(r.FetchOnly)
	fmt.Fprintf(w, "%-44s %10s | max %10s\n", "page's first render (navigation → drawn)", fr.Round(time.Millisecond), slices.Max(r.FirstRender).Round(time.Millisecond))
	fmt.Fprintf(w, "%-44s %10s | ratio %6.2f\n", "baseline: browser fetch+parse of Services", fo.Round(time.Millisecond), fr.Seconds()/fo.Seconds())
	fmt.Fprintf(w, "%-44s %10s\n", "client-go List of Services (pages of 500)", median(r.ClientGo).Round(time.Millisecond))
}

// Run starts an API server, fills it, serves the page and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	res := &Result{Options: o}
	if err := fill(ctx, srv, o, res); err != nil {
		return nil, err
	}
	addr, stopProxy, err := serveProxy(srv.Config)
	if err != nil {
		return nil, err
	}
	defer stopProxy()
	b, err := headless.Start(ctx, 1600, 1000)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	origin := "http://" + addr
	for range o.Rounds {
		// Each in a fresh tab, closed after, so that neither has the
		// other's connections (the page's watches) open.
		render, err := inTab(b, func(t *headless.Tab) (time.Duration, error) {
			return firstRender(ctx, t, origin+topology.Path, o.Services)
		})
		if err != nil {
			return nil, err
		}
		fetch, err := inTab(b, func(t *headless.Tab) (time.Duration, error) { return fetchOnly(ctx, t, origin) })
		if err != nil {
			return nil, err
		}
		start := time.Now()
		cont := ""
		for {
			l, err := srv.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				return nil, fmt.Errorf("list Services: %w", err)
			}
			if cont = l.Continue; cont == "" {
				break
			}
		}
		res.FirstRender = append(res.FirstRender, render)
		res.FetchOnly = append(res.FetchOnly, fetch)
		res.ClientGo = append(res.ClientGo, time.Since(start))
	}
	return res, b.Close()
}

const node = "bench-node"

// fill creates the namespaces, a Ready node, the Services, and for every
// SliceEvery-th Service three pods and an EndpointSlice of them.
func fill(ctx context.Context, srv *benchenv.Server, o Options, res *Result) error {
	c := srv.Client
	for i := range o.Namespaces {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if err := benchenv.DefaultServiceAccount(ctx, c, ns); err != nil {
			return err
		}
	}
	n, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	err = benchenv.Parallel(o.Services, o.Workers, func(i int) error {
		ns, name := fmt.Sprintf("bench-%d", i%o.Namespaces), fmt.Sprintf("svc-%06d", i)
		labels := map[string]string{"app": name}
		_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
			metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Service %s/%s: %w", ns, name, err)
		}
		if i%o.SliceEvery != 0 {
			return nil
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP), Name: ptr.To("")}},
		}
		for j := range 3 {
			pod := fmt.Sprintf("%s-%d", name, j)
			ip := fmt.Sprintf("10.%d.%d.%d", 100+j, (i/250)%250, i%250+1)
			if _, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: labels},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "nginx:1.25"}}}},
				metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, pod, err)
			}
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(j != 2)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}, NodeName: ptr.To(node)})
		}
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create EndpointSlice %s/%s: %w", ns, slice.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.Slices = (o.Services + o.SliceEvery - 1) / o.SliceEvery
	res.Pods = 3 * res.Slices
	return nil
}

// serveProxy serves the API server on a loopback port with the client's
// credentials, as kubectl proxy does for a user; stop ends it.
func serveProxy(cfg *rest.Config) (string, func(), error) {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("API server transport: %w", err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return "", nil, fmt.Errorf("API server URL: %w", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     rt,
		FlushInterval: -1, // watches stream
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("proxy listener: %w", err)
	}
	hs := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln) // returns once closed
	}()
	return ln.Addr().String(), func() {
		_ = hs.Close() // the page's watches never end by themselves
		<-done
	}, nil
}

// inTab runs f in a new tab of b, closed after.
func inTab(b *headless.Browser, f func(*headless.Tab) (time.Duration, error)) (time.Duration, error) {
	t, err := b.NewTab()
	if err != nil {
		return 0, err
	}
	defer t.Close()
	return f(t)
}

// pageState is what the page says of its first render.
type pageState struct {
	Ready    bool    `json:"ready"`
	Ms       float64 `json:"ms"`
	Services int     `json:"services"`
	Rows     int     `json:"rows"`
	Status   string  `json:"status"`
}

// firstRender opens the page afresh and waits for its first full render.
func firstRender(ctx context.Context, b *headless.Tab, page string, services int) (time.Duration, error) {
	if err := b.Navigate(page); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s, err := headless.Eval[pageState](b, `({
			ready: window.topologyReady === true,
			ms: window.topologyFirstRenderMs || 0,
			services: window.topology ? window.topology.counts().services : 0,
			rows: document.querySelectorAll('#services [data-service]').length,
			status: (document.getElementById('status') || {}).textContent || "",
		})`)
		if err != nil {
			return 0, err
		}
		if s.Ready {
			// The API's own Service (default/kubernetes) is there too.
			if s.Services < services || s.Rows == 0 {
				return 0, fmt.Errorf("the page is ready with %d Services and %d rows drawn, want %d Services", s.Services, s.Rows, services)
			}
			return time.Duration(s.Ms * float64(time.Millisecond)), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the page is not ready after 2 minutes: %+v", s)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fetchOnly is the time the browser takes, on the page's origin but
// without it, to fetch and parse the Services in the page's pages.
func fetchOnly(ctx context.Context, b *headless.Tab, origin string) (time.Duration, error) {
	// The API server's /version: the same origin, and no script of its own.
	if err := b.Navigate(origin + "/version"); err != nil {
		return 0, err
	}
	ms, err := headless.Eval[float64](b, `(async () => {
		const t0 = performance.now();
		let cont = "", n = 0;
		do {
			const r = await fetch("/api/v1/services?limit=" + (cont ? "2500&continue=" + encodeURIComponent(cont) : "500"), {headers: {Accept: "application/json"}});
			if (!r.ok) throw new Error("list: " + r.status);
			const l = await r.json();
			n += l.items.length;
			cont = l.metadata.continue || "";
		} while (cont);
		return performance.now() - t0;
	})()`)
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}
