// Package doctor diagnoses one Service from the API alone, for
// `svcnet doctor`. It says, in plain sentences, why a Service
// does not answer as its author expects (a selector that matches no pod,
// pods that are not Ready and why, a targetPort no container exposes, a
// load balancer still pending, nodes without a local endpoint) and what to
// do, each finding with the facts it used, and lists the DNS names the
// Service has.
//
// It reads only what upstream components publish, so it diagnoses any
// cluster the same way: pod conditions and container statuses (the
// scheduler's PodScheduled=False message, CrashLoopBackOff and the last
// termination), the kubelet's Warning events of reason Unhealthy for
// failing probes, the EndpointSlices' endpoint conditions and node names,
// the Service's own events (from the load-balancer IP allocator). Given
// a reader of the nodes' data planes (Options.DataPlane), it also compares
// where each node forwards the Service's cluster IPs with the
// EndpointSlices. Resolving the DNS names belongs to the CLI.
//
// It is cheap at any scale: a Get of the Service, then one List of its
// pods (by its selector) and one of its EndpointSlices; the
// namespace's events only when a pod is not Ready or a load balancer is
// pending; the nodes only with externalTrafficPolicy Local. It lists
// across namespaces only where nothing else can answer: for a missing
// Service, the names of the Services of its namespace (paged) and the
// Services of the same name elsewhere (by field selector); for a selector
// that matches no pod, the namespace's pods (for near misses) and the
// pods of that selector elsewhere (by label selector).
package doctor

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Severity says how much a finding matters: an error breaks the Service
// (Report.Healthy is false), a warning may, info explains.
type Severity string

// The severities, most serious first.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// rank orders severities, errors first.
func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// Code names what a finding found, stable for scripts and tests.
type Code string

// The findings' codes.
const (
	// ServiceNotFound: no Service of that name in the namespace (error).
	ServiceNotFound Code = "ServiceNotFound"
	// NoSelector: endpoints are managed by hand (info).
	NoSelector Code = "NoSelector"
	// SelectorMatchesNoPods: no pod of the namespace has the selector's
	// labels (error).
	SelectorMatchesNoPods Code = "SelectorMatchesNoPods"
	// NoReadyPods: pods match, none is a ready endpoint (error).
	NoReadyPods Code = "NoReadyPods"
	// The per-pod reasons for not being Ready: errors when no pod is
	// Ready, warnings otherwise (PodTerminating and PodFinished: info).
	PodUnschedulable      Code = "PodUnschedulable"
	PodCrashLooping       Code = "PodCrashLooping"
	PodContainerWaiting   Code = "PodContainerWaiting"
	ReadinessProbeFailing Code = "ReadinessProbeFailing"
	StartupProbeFailing   Code = "StartupProbeFailing"
	LivenessProbeFailing  Code = "LivenessProbeFailing"
	PodNotReady           Code = "PodNotReady"
	PodTerminating        Code = "PodTerminating"
	PodFinished           Code = "PodFinished"
	// TargetPortNotExposed: a numeric targetPort that pods declaring other
	// ports do not declare (error).
	TargetPortNotExposed Code = "TargetPortNotExposed"
	// TargetPortNotDeclared: a numeric targetPort on pods that declare no
	// port at all (warning: declaring is optional).
	TargetPortNotDeclared Code = "TargetPortNotDeclared"
	// NamedTargetPortNotFound: a named targetPort no container has (error;
	// warning when only some pods lack it).
	NamedTargetPortNotFound Code = "NamedTargetPortNotFound"
	// TargetPortProtocolMismatch: the targetPort is declared under another
	// protocol only (error for a named port, which then does not resolve;
	// warning for a number).
	TargetPortProtocolMismatch Code = "TargetPortProtocolMismatch"
	// ReadyPodsMissingFromEndpointSlices: Ready pods that the
	// EndpointSlices do not list as ready endpoints (warning).
	ReadyPodsMissingFromEndpointSlices Code = "ReadyPodsMissingFromEndpointSlices"
	// LoadBalancerPending: type LoadBalancer without an ingress address
	// (error).
	LoadBalancerPending Code = "LoadBalancerPending"
	// SourceRangesExcludeClient: loadBalancerSourceRanges exclude
	// Options.ClientIP (warning).
	SourceRangesExcludeClient Code = "SourceRangesExcludeClient"
	// NoLocalEndpointOnNodes: externalTrafficPolicy Local and Ready nodes
	// without a ready endpoint of the Service (warning).
	NoLocalEndpointOnNodes Code = "NoLocalEndpointOnNodes"
	// ReadyEndpoints: where connections go (info).
	ReadyEndpoints Code = "ReadyEndpoints"
	// DNSNames: the names the cluster DNS should answer (info).
	DNSNames Code = "DNSNames"
	// DataPlaneDrift: a node's data plane forwards a cluster IP otherwise
	// than the EndpointSlices say, or not at all (error).
	DataPlaneDrift Code = "DataPlaneDrift"
	// DataPlaneUnreadable: a node's data plane could not be read
	// (warning).
	DataPlaneUnreadable Code = "DataPlaneUnreadable"
	// DataPlaneInSync: nodes whose data plane forwards the Service as its
	// EndpointSlices say, with their proxy's last sync (info).
	DataPlaneInSync Code = "DataPlaneInSync"
	// DNSMismatch: the cluster DNS answers a name of the Service otherwise
	// than the Service and its endpoints say (error).
	DNSMismatch Code = "DNSMismatch"
	// DNSUnanswered: the cluster DNS could not be asked (warning).
	DNSUnanswered Code = "DNSUnanswered"
)

// Evidence is one fact a finding used, as a name and a value.
type Evidence struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Finding is one thing the doctor found: what is wrong and what to do (the
// sentence) and the facts it used.
type Finding struct {
	Severity Severity   `json:"severity"`
	Code     Code       `json:"code"`
	Sentence string     `json:"sentence"`
	Evidence []Evidence `json:"evidence,omitempty"`
}

// DNSRecord is a name the cluster DNS should answer for the Service, and
// the answers it should give: addresses for A and AAAA, "PORT TARGET" for
// SRV, the external name for CNAME. Answers is empty when the name should
// have none (a headless Service without ready endpoints).
type DNSRecord struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Answers []string `json:"answers,omitempty"`
}

// Report is the diagnosis of one Service: its identity, whether it is
// healthy (no error finding), the findings (errors first, then warnings,
// then info, each group in the order the checks ran) and its DNS records.
type Report struct {
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Type       corev1.ServiceType `json:"type,omitempty"`
	ClusterIPs []string           `json:"clusterIPs,omitempty"`
	Selector   map[string]string  `json:"selector,omitempty"`
	Healthy    bool               `json:"healthy"`
	Findings   []Finding          `json:"findings"`
	DNS        []DNSRecord        `json:"dns,omitempty"`
	// DataPlane is what each node's data plane holds for the Service (as
	// `svcnet proxy list`), when it was read.
	DataPlane []proxy.NodeFrontends `json:"dataPlane,omitempty"`
}

// Options tune a diagnosis.
type Options struct {
	// ClusterDomain is the cluster DNS zone; empty means cluster.local.
	ClusterDomain string
	// ClientIP, when valid, is the address the caller connects from: a
	// LoadBalancer Service whose source ranges exclude it is reported.
	ClientIP netip.Addr
	// DataPlane, if set, reads the nodes' Service proxies back, to be
	// compared with the EndpointSlices.
	DataPlane DataPlane
	// Resolver, if set, asks the cluster DNS the Service's names, to be
	// compared with the records they should have.
	Resolver Resolver
	// Now is the clock for ages; nil is time.Now.
	Now func() time.Time
	// Core, if set, is the core group's REST client
	// (CoreV1().RESTClient()), through which the doctor lists the
	// namespace's pods as metadata when it needs their labels alone (a
	// selector's near misses).
	Core rest.Interface
}

// diagnosis is the state of one Diagnose call.
type diagnosis struct {
	ctx    context.Context
	client kubernetes.Interface
	opts   Options
	svc    *corev1.Service
	slices []discoveryv1.EndpointSlice
	// pods are the pods of the namespace, by name; matched those the
	// selector selects.
	pods    []*corev1.Pod
	matched []*corev1.Pod
	// events are the namespace's events, listed at most once (loaded).
	events   []corev1.Event
	loaded   bool
	report   *Report
	findings []Finding
}

// Diagnose diagnoses the Service namespace/name (namespace "" is
// "default") from the API. A missing Service is a finding, not an error;
// the error is an API call that failed.
func Diagnose(ctx context.Context, client kubernetes.Interface, namespace, name string, opts Options) (*Report, error) {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	d := &diagnosis{ctx: ctx, client: client, opts: opts, report: &Report{Namespace: namespace, Name: name}}
	svc, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if err := d.serviceNotFound(); err != nil {
			return nil, err
		}
		return d.finish(), nil
	case err != nil:
		return nil, fmt.Errorf("get service %s/%s: %w", namespace, name, err)
	}
	d.svc = svc
	d.report.Type = svc.Spec.Type
	d.report.ClusterIPs = svc.Spec.ClusterIPs
	if len(svc.Spec.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		d.report.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	d.report.Selector = svc.Spec.Selector
	if err := d.run(); err != nil {
		return nil, err
	}
	return d.finish(), nil
}

// run runs the checks of an existing Service in the order their findings
// should be read.
func (d *diagnosis) run() error {
	svc := d.svc
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		d.dnsNames()
		return nil
	}
	list, err := d.client.DiscoveryV1().EndpointSlices(svc.Namespace).List(d.ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: svc.Name}.String(),
	})
	if err != nil {
		return fmt.Errorf("list endpointslices of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	d.slices = list.Items
	slices.SortFunc(d.slices, func(a, b discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	if len(svc.Spec.Selector) == 0 {
		d.noSelector()
	} else if err := d.selectedPods(); err != nil {
		return err
	}
	if err := d.loadBalancer(); err != nil {
		return err
	}
	if err := d.localEndpoints(); err != nil {
		return err
	}
	if err := d.dataPlane(); err != nil {
		return err
	}
	d.readyEndpoints()
	d.dnsNames()
	return nil
}

// selectedPods runs the checks of a Service with a selector: pods,
// ports, and the EndpointSlices against the pods. It lists the pods the
// selector selects, and the namespace's others only when there are none,
// to find near misses among their labels.
func (d *diagnosis) selectedPods() error {
	svc := d.svc
	selector := labels.SelectorFromSet(svc.Spec.Selector)
	list, err := d.client.CoreV1().Pods(svc.Namespace).List(d.ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return fmt.Errorf("list pods of selector %s in namespace %s: %w", selector, svc.Namespace, err)
	}
	var elsewhere *corev1.PodList
	if !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return selector.Matches(labels.Set(p.Labels)) }) {
		// No pod matches: the namespace's pods, for near misses, and the
		// selector's pods in other namespaces, read at the same time.
		var g errgroup.Group
		g.Go(func() (err error) {
			list, err = d.namespacePods()
			return err
		})
		g.Go(func() (err error) {
			elsewhere, err = d.podsElsewhere()
			return err
		})
		if err := g.Wait(); err != nil {
			return err
		}
	}
	for i := range list.Items {
		p := &list.Items[i]
		d.pods = append(d.pods, p)
		if selector.Matches(labels.Set(p.Labels)) {
			d.matched = append(d.matched, p)
		}
	}
	byName := func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(d.pods, byName)
	slices.SortFunc(d.matched, byName)
	if len(d.matched) == 0 {
		d.selectorMatchesNoPods(elsewhere)
		return nil
	}
	if err := d.podsReady(); err != nil {
		return err
	}
	d.targetPorts()
	d.missingFromSlices()
	return nil
}

// now is the diagnosis's clock.
func (d *diagnosis) now() time.Time {
	if d.opts.Now != nil {
		return d.opts.Now()
	}
	return time.Now()
}

// namespacePods lists the pods of the Service's namespace, whose names
// and labels alone the search for near misses reads: through
// Options.Core, as metadata (PartialObjectMetadataList) of which only
// those are decoded, at thousands of pods a fraction of the whole list's
// cost; else the typed list.
func (d *diagnosis) namespacePods() (*corev1.PodList, error) {
	ns := d.svc.Namespace
	if d.opts.Core == nil {
		list, err := d.client.CoreV1().Pods(ns).List(d.ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods in namespace %s: %w", ns, err)
		}
		return list, nil
	}
	body, err := d.opts.Core.Get().Namespace(ns).Resource("pods").
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").DoRaw(d.ctx)
	if err != nil {
		return nil, fmt.Errorf("list the metadata of pods in namespace %s: %w", ns, err)
	}
	items := gjson.GetBytes(body, "items").Array()
	list := &corev1.PodList{Items: make([]corev1.Pod, len(items))}
	for i, it := range items {
		p := &list.Items[i]
		p.Namespace, p.Name = ns, it.Get("metadata.name").String()
		if ls := it.Get("metadata.labels"); ls.IsObject() {
			p.Labels = map[string]string{}
			ls.ForEach(func(k, v gjson.Result) bool {
				p.Labels[k.String()] = v.String()
				return true
			})
		}
	}
	return list, nil
}

// add records a finding.
func (d *diagnosis) add(sev Severity, code Code, sentence string, evidence ...Evidence) {
	d.findings = append(d.findings, Finding{Severity: sev, Code: code, Sentence: sentence, Evidence: evidence})
}

// finish orders the findings, errors first, and decides Healthy.
func (d *diagnosis) finish() *Report {
	slices.SortStableFunc(d.findings, func(a, b Finding) int { return cmp.Compare(a.Severity.rank(), b.Severity.rank()) })
	d.report.Findings = d.findings
	if d.report.Findings == nil {
		d.report.Findings = []Finding{}
	}
	d.report.Healthy = !slices.ContainsFunc(d.findings, func(f Finding) bool { return f.Severity == SeverityError })
	return d.report
}

// ev is a piece of evidence.
func ev(name, value string) Evidence { return Evidence{Name: name, Value: value} }

// Write renders the report as text: a line saying which Service and
// whether it is healthy, then one paragraph per finding (its severity,
// code and sentence) with its evidence indented below.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Service %s/%s", r.Namespace, r.Name)
	var about []string
	if r.Type != "" {
		about = append(about, string(r.Type))
	}
	if len(r.ClusterIPs) > 0 {
		about = append(about, strings.Join(r.ClusterIPs, ","))
	}
	if len(r.Selector) > 0 {
		about = append(about, "selector "+labels.Set(r.Selector).String())
	}
	if len(about) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
	}
	counts := map[Severity]int{}
	for _, f := range r.Findings {
		counts[f.Severity]++
	}
	state := "healthy"
	if !r.Healthy {
		state = "not healthy"
	}
	fmt.Fprintf(&b, ": %s, %s, %s, %d info\n", state,
		plural(counts[SeverityError], "error", "errors"), plural(counts[SeverityWarning], "warning", "warnings"), counts[SeverityInfo])
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "\n%s %s: %s\n", f.Severity, f.Code, f.Sentence)
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "    %s: %s\n", e.Name, e.Value)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report of service %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}

// plural is "1 error" or "2 errors".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// maxListed bounds the names a sentence lists, maxEvidence the items of
// one kind in a finding's evidence.
const (
	maxListed   = 3
	maxEvidence = 10
)

// nameList is "a", "a and b", "a, b and c" or "a, b, c and 4 more".
func nameList(names []string) string {
	switch {
	case len(names) == 1:
		return names[0]
	case len(names) <= maxListed:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// capped is the first maxEvidence of list, joined, with how many more.
func capped(list []string) string {
	if len(list) <= maxEvidence {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:maxEvidence], ", "), len(list)-maxEvidence)
}
