// Command doctor benchmarks `svcnet doctor` on a large cluster: with N
// Services (default 10,000) in one namespace, each selecting a Ready pod
// of its own listed in an EndpointSlice, the time to diagnose one Service
// from the API, for a healthy Service and for one whose selector matches
// no pod (which lists the namespace's pods to find near misses), against
// the reads `kubectl describe service` makes for the same Service (the
// Service, its EndpointSlices, its events), taking turns on one API
// server. The nodes' data planes and the cluster DNS are not part of it:
// the API server runs alone, without nodes.
//
//	go run ./bench/doctor -services 10000 -rounds 50
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/bench/internal/benchmain"
	"github.com/svcnet/svcnet/internal/doctor"
)

func main() {
	c := config{}
	flag.IntVar(&c.services, "services", 10000, "Services, each with a Ready pod and an EndpointSlice")
	flag.IntVar(&c.rounds, "rounds", 50, "diagnoses of each kind")
	flag.IntVar(&c.workers, "workers", 16, "concurrent clients while creating the objects")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	benchmain.Main(*cpuProfile, c.run)
}

type config struct {
	services, rounds, workers int
}

// stat is one kind of request's latencies.
type stat struct {
	name     string
	p50, p99 time.Duration
}

type result struct {
	services, rounds int
	healthy, typo    stat
	describe         stat
}

func (r *result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d Services with a Ready pod and an EndpointSlice each, %d rounds\n", r.services, r.rounds)
	fmt.Fprintf(w, "%-24s %10s %10s | %-18s %10s | %8s\n", "svcnet doctor", "p50", "p99", "baseline", "p50", "ratio")
	for _, s := range []stat{r.healthy, r.typo} {
		fmt.Fprintf(w, "%-24s %10s %10s | %-18s %10s | %8.2f\n", s.name, s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond),
			r.describe.name, r.describe.p50.Round(10*time.Microsecond), float64(s.p50)/float64(r.describe.p50))
	}
}

func (c config) run(ctx context.Context) (*result, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if err := populate(ctx, srv.Client, c.services, c.workers); err != nil {
		return nil, err
	}
	typo := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "typo"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "svc-00000x"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := srv.Client.CoreV1().Services("default").Create(ctx, typo, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create service typo: %w", err)
	}
	var healthy, typos, describes []time.Duration
	for i := range c.rounds {
		name := fmt.Sprintf("svc-%05d", i*c.services/c.rounds)
		for _, step := range []struct {
			lat *[]time.Duration
			run func() error
		}{
			{&healthy, func() error { return diagnose(ctx, srv.Client, name, true) }},
			{&typos, func() error { return diagnose(ctx, srv.Client, "typo", false) }},
			{&describes, func() error { return describe(ctx, srv.Client, name) }},
		} {
			start := time.Now()
			if err := step.run(); err != nil {
				return nil, err
			}
			*step.lat = append(*step.lat, time.Since(start))
		}
	}
	return &result{services: c.services, rounds: c.rounds,
		healthy: percentiles("healthy Service", healthy), typo: percentiles("selector matching none", typos),
		describe: percentiles("describe's reads", describes)}, nil
}

// diagnose runs the doctor on default/name, as `svcnet doctor` does
// without the nodes, and checks its verdict.
func diagnose(ctx context.Context, client kubernetes.Interface, name string, wantHealthy bool) error {
	r, err := doctor.Diagnose(ctx, client, "default", name, doctor.Options{Core: client.CoreV1().RESTClient()})
	if err != nil {
		return fmt.Errorf("diagnose %s: %w", name, err)
	}
	if r.Healthy != wantHealthy {
		return fmt.Errorf("diagnose %s: healthy %v, want %v: %+v", name, r.Healthy, wantHealthy, r.Findings)
	}
	return nil
}

// describe makes the reads of `kubectl describe service NAME`: the
// Service, its EndpointSlices and its events.
func describe(ctx context.Context, client kubernetes.Interface, name string) error {
	svc, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get service %s: %w", name, err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: name}.String()}); err != nil {
		return fmt.Errorf("list endpointslices of %s: %w", name, err)
	}
	if _, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": name, "involvedObject.namespace": "default", "involvedObject.uid": string(svc.UID)}.String()}); err != nil {
		return fmt.Errorf("list events of %s: %w", name, err)
	}
	return nil
}

// populate creates n Services svc-NNNNN, each selecting a Running, Ready
// pod of its own, and an EndpointSlice listing that pod.
func populate(ctx context.Context, client kubernetes.Interface, n, workers int) error {
	return benchenv.Parallel(n, workers, func(i int) error {
		name := fmt.Sprintf("svc-%05d", i)
		sel := map[string]string{"app": name}
		ip := fmt.Sprintf("10.244.%d.%d", i/250, i%250+2)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Labels: sel},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}}}
		pod, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s: %w", name, err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}}
		if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pod %s Ready: %w", name, err)
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create service %s: %w", name, err)
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new(""), Port: new(int32(80)), Protocol: new(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, NodeName: new("node-a"),
				Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod.Name, UID: pod.UID}}},
		}
		if _, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create endpointslice of %s: %w", name, err)
		}
		return nil
	})
}

// percentiles are the p50 and p99 of lat.
func percentiles(name string, lat []time.Duration) stat {
	s := slices.Sorted(slices.Values(lat))
	if len(s) == 0 {
		return stat{name: name}
	}
	return stat{name: name, p50: s[len(s)/2], p99: s[len(s)*99/100]}
}
