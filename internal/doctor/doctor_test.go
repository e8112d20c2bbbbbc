package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// service is a ClusterIP Service in default with one port and selector.
func service(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("svc-" + name)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, Selector: selector, Ports: ports,
			ClusterIP: "10.96.0.12", ClusterIPs: []string{"10.96.0.12"},
		},
	}
}

// with modifies a Service.
func with(svc *corev1.Service, f func(*corev1.Service)) *corev1.Service {
	f(svc)
	return svc
}

// pod is a Running, Ready pod in ns on node-a with container "web"
// declaring 80/TCP "web".
func pod(ns, name, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

// notReady makes a pod's Ready condition False.
func notReady(p *corev1.Pod, reason, message string) *corev1.Pod {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: reason, Message: message}
		}
	}
	p.Status.ContainerStatuses[0].Ready = false
	return p
}

// podWith modifies a pod.
func podWith(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod {
	f(p)
	return p
}

// endpoint is a ready endpoint of a pod on a node.
type endpoint struct {
	pod, ip, node string
	notReady      bool
}

// slice is the EndpointSlice of a Service with one port.
func slice(svc, portName string, port int32, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new(portName), Port: new(port), Protocol: new(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: new(!e.notReady)},
			NodeName:   new(e.node),
		}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: e.pod, UID: types.UID("uid-" + e.pod)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// event is a Warning event about an object in default.
func event(kind, name, fieldPath, reason, message string, count int32) *corev1.Event {
	t := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s.%s.%d", name, reason, count)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "default", Name: name, FieldPath: fieldPath,
			UID: types.UID(map[string]string{"Pod": "uid-", "Service": "svc-"}[kind] + name)},
		Type: corev1.EventTypeWarning, Reason: reason, Message: message, Count: count,
		FirstTimestamp: t, LastTimestamp: t, Source: corev1.EventSource{Component: map[string]string{"Pod": "kubelet", "Service": "metallb-controller"}[kind]},
	}
}

// node is a Ready node.
func node(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// want is a finding a case expects: its code, severity and words of its
// sentence.
type want struct {
	code     Code
	severity Severity
	says     []string
}

func TestDiagnose(t *testing.T) {
	nginx := map[string]string{"app": "nginx"}
	tmpl := map[string]string{"app": "nginx", "pod-template-hash": "5d8f"}
	cases := []struct {
		name    string
		objects []runtime.Object
		svc     string
		opts    Options
		healthy bool
		// first is the code of the first finding, "" for any.
		first Code
		want  []want
		// absent are codes that must not be found.
		absent []Code
	}{
		{
			name: "seed 003 selector typo",
			objects: []runtime.Object{
				service("web", map[string]string{"app": "ngnix"}),
				pod("default", "nginx-5d8f-a", "10.244.0.5", tmpl),
				pod("default", "nginx-5d8f-b", "10.244.0.6", tmpl),
				pod("default", "redis-0", "10.244.0.7", map[string]string{"app": "redis"}),
			},
			svc: "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{
				"The selector app=ngnix matches no pod in namespace default",
				"Did you mean app=nginx? Pods nginx-5d8f-a and nginx-5d8f-b have app=nginx",
			}}, {DNSNames, SeverityInfo, nil}},
			absent: []Code{NoReadyPods, ReadyEndpoints},
		},
		{
			name: "selector typo on one value of two",
			objects: []runtime.Object{
				service("web", map[string]string{"app": "nginx", "tier": "frontend"}),
				pod("default", "web-1", "10.244.0.5", map[string]string{"app": "nginx", "tier": "front-end"}),
			},
			svc: "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{"Did you mean app=nginx,tier=front-end? Pod web-1 has tier=front-end"}}},
		},
		{
			name: "selector with a key of another name",
			objects: []runtime.Object{
				service("web", map[string]string{"name": "nginx"}),
				pod("default", "web-1", "10.244.0.5", map[string]string{"run": "nginx"}),
			},
			svc: "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{"Did you mean run=nginx?"}}},
		},
		{
			name: "selector with a label the pods lack",
			objects: []runtime.Object{
				service("web", map[string]string{"app": "nginx", "tier": "web"}),
				pod("default", "web-1", "10.244.0.5", nginx),
			},
			svc: "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{"Did you mean app=nginx? Pod web-1 has no label tier=web"}}},
		},
		{
			name: "pods of the selector in another namespace",
			objects: []runtime.Object{
				service("web", nginx),
				pod("default", "redis-0", "10.244.0.7", map[string]string{"app": "redis"}),
				pod("prod", "nginx-1", "10.244.1.5", nginx),
				pod("staging", "nginx-1", "10.244.1.6", nginx),
			},
			svc: "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{"Pods that match it run in namespaces prod and staging", "own namespace only"}}},
		},
		{
			name:    "no pod in the namespace",
			objects: []runtime.Object{service("web", nginx)},
			svc:     "web", first: SelectorMatchesNoPods,
			want: []want{{SelectorMatchesNoPods, SeverityError, []string{"Namespace default has no pod at all"}}},
		},
		{
			name: "service not found, near name and other namespace",
			objects: []runtime.Object{
				service("web", nginx),
				with(service("wbe", nginx), func(s *corev1.Service) { s.Namespace = "prod" }),
			},
			svc: "wbe", first: ServiceNotFound,
			want: []want{{ServiceNotFound, SeverityError, []string{
				`Service "wbe" does not exist in namespace "default". Did you mean "web"?`,
				`A Service named "wbe" exists in namespace prod: give that namespace (-n prod).`,
			}}},
			absent: []Code{DNSNames},
		},
		{
			name:    "service not found, nothing near",
			objects: []runtime.Object{service("database", nginx)},
			svc:     "web", first: ServiceNotFound,
			want: []want{{ServiceNotFound, SeverityError, []string{"No Service there has a similar name"}}},
		},
		{
			name: "no selector, endpoints by hand",
			objects: []runtime.Object{
				service("external-db", nil),
				slice("external-db", "http", 80, endpoint{ip: "192.0.2.10"}),
			},
			svc: "external-db", healthy: true,
			want: []want{
				{NoSelector, SeverityInfo, []string{"The Service has no selector, so its endpoints are managed by hand", "1 EndpointSlice has 1 ready of 1 endpoints"}},
				{ReadyEndpoints, SeverityInfo, []string{"The Service has 1 ready endpoint"}},
			},
			absent: []Code{SelectorMatchesNoPods},
		},
		{
			name:    "no selector and no endpoints",
			objects: []runtime.Object{service("external-db", nil)},
			svc:     "external-db", healthy: true,
			want: []want{{NoSelector, SeverityInfo, []string{"There is none, so connections to the Service are refused"}}},
		},
		{
			name: "readiness probe failing",
			objects: []runtime.Object{
				service("web", nginx),
				notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", "containers with unready status: [web]"),
				event("Pod", "web-1", "spec.containers{web}", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503", 12),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a", notReady: true}),
			},
			svc: "web", first: NoReadyPods,
			want: []want{
				{NoReadyPods, SeverityError, []string{"The selector app=nginx matches 1 pod (web-1), but none is Ready"}},
				{ReadinessProbeFailing, SeverityError, []string{
					`Pod web-1 is not Ready: the readiness probe of container web fails: "Readiness probe failed: HTTP probe failed with statuscode: 503"`,
				}},
			},
			absent: []Code{ReadyEndpoints, ReadyPodsMissingFromEndpointSlices},
		},
		{
			name: "readiness probe failing on one pod of two",
			objects: []runtime.Object{
				service("web", nginx),
				pod("default", "web-1", "10.244.0.5", nginx),
				notReady(pod("default", "web-2", "10.244.0.6", nginx), "ContainersNotReady", "containers with unready status: [web]"),
				event("Pod", "web-2", "spec.containers{web}", "Unhealthy", "Readiness probe failed: dial tcp 10.244.0.6:80: connect: connection refused", 3),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}, endpoint{pod: "web-2", ip: "10.244.0.6", node: "node-a", notReady: true}),
			},
			svc: "web", healthy: true,
			want: []want{
				{ReadinessProbeFailing, SeverityWarning, []string{"Pod web-2 is not Ready", "connection refused"}},
				{ReadyEndpoints, SeverityInfo, []string{"1 ready endpoint"}},
			},
			absent: []Code{NoReadyPods},
		},
		{
			name: "not ready without a probe event",
			objects: []runtime.Object{
				service("web", nginx),
				notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", "containers with unready status: [web]"),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{PodNotReady, SeverityError, []string{"Pod web-1 is not Ready (ContainersNotReady: containers with unready status: [web])"}}},
		},
		{
			name: "crash loop",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", ""), func(p *corev1.Pod) {
					p.Status.ContainerStatuses[0].RestartCount = 5
					p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 1m20s restarting failed container=web"}}
					p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
				}),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{PodCrashLooping, SeverityError, []string{
				"Pod web-1 is in CrashLoopBackOff: container web last exited with exit code 1 (Error)",
				"kubectl logs -n default web-1 -c web --previous",
			}}},
		},
		{
			name: "image pull back-off",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(notReady(pod("default", "web-1", "", nginx), "ContainersNotReady", ""), func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodPending
					p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "ngnix:latest"`}}
				}),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{PodContainerWaiting, SeverityError, []string{`container web is waiting: ImagePullBackOff (Back-off pulling image "ngnix:latest")`}}},
		},
		{
			name: "pending, unschedulable",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(pod("default", "web-1", "", nginx), func(p *corev1.Pod) {
					p.Spec.NodeName = ""
					p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
						Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
						Message: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
					}}}
				}),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{PodUnschedulable, SeverityError, []string{`Pod web-1 is Pending: the scheduler cannot place it: "0/1 nodes are available: 1 Insufficient cpu.`}}},
		},
		{
			name: "startup probe failing",
			objects: []runtime.Object{
				service("web", nginx),
				notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", ""),
				event("Pod", "web-1", "spec.containers{web}", "Unhealthy", "Startup probe failed: exit status 1", 4),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{StartupProbeFailing, SeverityError, []string{`the startup probe of container web fails: "Startup probe failed: exit status 1"`, "give the probe more time"}}},
		},
		{
			name: "liveness probe failing",
			objects: []runtime.Object{
				service("web", nginx),
				notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", ""),
				event("Pod", "web-1", "spec.containers{web}", "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500", 4),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{LivenessProbeFailing, SeverityError, []string{`the liveness probe of container web fails`, "The kubelet restarts a container"}}},
		},
		{
			name: "only finished pods, four of them",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(pod("default", "job-1", "10.244.0.5", nginx), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				podWith(pod("default", "job-2", "10.244.0.6", nginx), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				podWith(pod("default", "job-3", "10.244.0.7", nginx), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				podWith(pod("default", "job-4", "10.244.0.8", nginx), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			},
			svc: "web", first: NoReadyPods,
			want: []want{
				{NoReadyPods, SeverityError, []string{"matches 4 pods (job-1, job-2, job-3 and 1 more)"}},
				{PodFinished, SeverityError, []string{"Pods job-1, job-2, job-3 and 1 more are finished (phase Succeeded)"}},
			},
			absent: []Code{TargetPortNotExposed, TargetPortNotDeclared},
		},
		{
			name: "pending, no scheduler",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(pod("default", "web-1", "", nginx), func(p *corev1.Pod) {
					p.Spec.NodeName, p.Spec.SchedulerName = "", "my-scheduler"
					p.Status = corev1.PodStatus{Phase: corev1.PodPending}
				}),
			},
			svc: "web", first: NoReadyPods,
			want: []want{{PodUnschedulable, SeverityError, []string{"Pod web-1 is Pending: no scheduler has placed it yet", `Check that the scheduler "my-scheduler" runs`}}},
		},
		{
			name: "terminating pod beside a ready one",
			objects: []runtime.Object{
				service("web", nginx),
				pod("default", "web-1", "10.244.0.5", nginx),
				podWith(pod("default", "web-2", "10.244.0.6", nginx), func(p *corev1.Pod) {
					p.DeletionTimestamp = new(metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
					p.DeletionGracePeriodSeconds = new(int64(30))
				}),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", healthy: true,
			want: []want{{PodTerminating, SeverityInfo, []string{"Pod web-2 is terminating (deletion requested at 2026-01-02T03:04:05Z)"}}},
		},
		{
			name: "targetPort 8080, pods declare 80",
			objects: []runtime.Object{
				service("web", nginx, corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}),
				pod("default", "web-1", "10.244.0.5", nginx),
				slice("web", "http", 8080, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", first: TargetPortNotExposed,
			want: []want{{TargetPortNotExposed, SeverityError, []string{
				`targetPort 8080 of port "http" (80/TCP) is not a port that the selected pods declare: they declare 80/TCP "web" (container web)`,
				"set targetPort to 80, or make the application listen on 8080/TCP",
			}}},
		},
		{
			name: "numeric targetPort, pods declare no port",
			objects: []runtime.Object{
				service("web", nginx),
				podWith(pod("default", "web-1", "10.244.0.5", nginx), func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil }),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", healthy: true,
			want:   []want{{TargetPortNotDeclared, SeverityWarning, []string{"No container of the selected pods declares port 80/TCP", "Kubernetes does not require it"}}},
			absent: []Code{TargetPortNotExposed},
		},
		{
			name: "numeric targetPort declared under UDP only",
			objects: []runtime.Object{
				service("dns", map[string]string{"k8s-app": "dns"}, corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)}),
				podWith(pod("default", "dns-1", "10.244.0.5", map[string]string{"k8s-app": "dns"}), func(p *corev1.Pod) {
					p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
				}),
				slice("dns", "dns-tcp", 53, endpoint{pod: "dns-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "dns", healthy: true,
			want: []want{{TargetPortProtocolMismatch, SeverityWarning, []string{`declared by the selected pods only as 53/UDP "dns" (container web), not under TCP`}}},
		},
		{
			name: "named targetPort no container has",
			objects: []runtime.Object{
				service("web", nginx, corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}),
				pod("default", "web-1", "10.244.0.5", nginx),
				func() *discoveryv1.EndpointSlice {
					s := slice("web", "", 0, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"})
					s.Ports = []discoveryv1.EndpointPort{}
					return s
				}(),
			},
			svc: "web", first: NamedTargetPortNotFound,
			want: []want{{NamedTargetPortNotFound, SeverityError, []string{
				`targetPort "http" of port "http" (80/TCP) is not the name of a TCP port of any container of the selected pods, so the EndpointSlice controller leaves port "http" (80/TCP) out of their endpoints and connections to it are refused`,
				`They declare 80/TCP "web" (container web): name the right one "http"`,
			}}},
			absent: []Code{ReadyPodsMissingFromEndpointSlices},
		},
		{
			name: "named targetPort on some pods only, one in a sidecar",
			objects: []runtime.Object{
				service("web", nginx, corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}),
				podWith(pod("default", "web-1", "10.244.0.5", nginx), func(p *corev1.Pod) {
					p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: new(corev1.ContainerRestartPolicyAlways),
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
				}),
				pod("default", "web-2", "10.244.0.6", nginx),
				slice("web", "http", 8080, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
				func() *discoveryv1.EndpointSlice {
					s := slice("web", "", 0, endpoint{pod: "web-2", ip: "10.244.0.6", node: "node-a"})
					s.Name, s.Ports = "web-fghij", []discoveryv1.EndpointPort{}
					return s
				}(),
			},
			svc: "web", healthy: true,
			want: []want{{NamedTargetPortNotFound, SeverityWarning, []string{
				`targetPort "http" of port "http" (80/TCP) is not the name of a TCP port of any container of pod web-2, so the EndpointSlice controller leaves port "http" (80/TCP) out of their endpoints: they get no traffic on it`,
			}}},
			absent: []Code{ReadyPodsMissingFromEndpointSlices},
		},
		{
			name: "named targetPort under another protocol",
			objects: []runtime.Object{
				service("dns", map[string]string{"k8s-app": "dns"}, corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns")}),
				podWith(pod("default", "dns-1", "10.244.0.5", map[string]string{"k8s-app": "dns"}), func(p *corev1.Pod) {
					p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}
				}),
				func() *discoveryv1.EndpointSlice {
					s := slice("dns", "", 0, endpoint{pod: "dns-1", ip: "10.244.0.5", node: "node-a"})
					s.Ports = []discoveryv1.EndpointPort{}
					return s
				}(),
			},
			svc: "dns", first: TargetPortProtocolMismatch,
			want: []want{{TargetPortProtocolMismatch, SeverityError, []string{
				`targetPort "dns" of port "dns-tcp" (53/TCP) names 53/UDP "dns" (container web) of the selected pods, but a named targetPort resolves only to a port of the Service port's protocol (TCP)`,
			}}},
			absent: []Code{NamedTargetPortNotFound, ReadyPodsMissingFromEndpointSlices},
		},
		{
			name: "ready pod missing from the slices",
			objects: []runtime.Object{
				service("web", nginx),
				pod("default", "web-1", "10.244.0.5", nginx),
				pod("default", "web-2", "10.244.0.6", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", healthy: true,
			want: []want{{ReadyPodsMissingFromEndpointSlices, SeverityWarning, []string{"Pod web-2 is Ready but not a ready endpoint in the Service's EndpointSlices"}}},
		},
		{
			name: "load balancer pending, pool exhausted",
			objects: []runtime.Object{
				with(service("web", nginx), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }),
				pod("default", "web-1", "10.244.0.5", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
				event("Service", "web", "", "AllocationFailed", `Failed to allocate IP for "default/web": no available IPs`, 2),
			},
			svc: "web", first: LoadBalancerPending,
			want: []want{{LoadBalancerPending, SeverityError, []string{
				`has no external address yet (pending): the allocator says "Failed to allocate IP for \"default/web\": no available IPs" (AllocationFailed)`,
			}}},
		},
		{
			name: "load balancer pending, foreign class",
			objects: []runtime.Object{
				with(service("web", nginx), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeLoadBalancer
					s.Spec.LoadBalancerClass = new("example.com/lb")
				}),
				pod("default", "web-1", "10.244.0.5", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", first: LoadBalancerPending,
			want: []want{{LoadBalancerPending, SeverityError, []string{`Its loadBalancerClass is "example.com/lb"`}}},
		},
		{
			name: "source ranges exclude the client",
			objects: []runtime.Object{
				with(service("web", nginx), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeLoadBalancer
					s.Annotations = map[string]string{sourceRangesAnnotation: "10.0.0.0/24, 10.1.0.0/24"}
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.0.0.200"}}
				}),
				pod("default", "web-1", "10.244.0.5", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
			},
			svc: "web", opts: Options{ClientIP: netip.MustParseAddr("192.168.1.5")}, healthy: true,
			want:   []want{{SourceRangesExcludeClient, SeverityWarning, []string{"loadBalancerSourceRanges (10.0.0.0/24, 10.1.0.0/24) do not include your address 192.168.1.5", "192.168.1.5/32"}}},
			absent: []Code{LoadBalancerPending},
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint on a node",
			objects: []runtime.Object{
				with(service("web", nginx), func(s *corev1.Service) {
					s.Spec.Type = corev1.ServiceTypeNodePort
					s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				}),
				pod("default", "web-1", "10.244.0.5", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}),
				node("node-a"), node("node-b"),
			},
			svc: "web", healthy: true,
			want: []want{{NoLocalEndpointOnNodes, SeverityWarning, []string{
				"externalTrafficPolicy is Local, and node node-b has no ready endpoint of this Service: external traffic that reaches it through a node port or the load-balancer address is dropped",
			}}},
		},
		{
			name: "healthy",
			objects: []runtime.Object{
				service("web", nginx),
				pod("default", "web-1", "10.244.0.5", nginx),
				pod("default", "web-2", "10.244.0.6", nginx),
				slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}, endpoint{pod: "web-2", ip: "10.244.0.6", node: "node-a"}),
			},
			svc: "web", healthy: true, first: ReadyEndpoints,
			want: []want{
				{ReadyEndpoints, SeverityInfo, []string{"The Service has 2 ready endpoints"}},
				{DNSNames, SeverityInfo, []string{"Pods find the Service as web.default.svc.cluster.local (web from its own namespace, web.default from others)"}},
			},
		},
		{
			name: "external name",
			objects: []runtime.Object{with(service("db", nil), func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports = "", nil, nil
			})},
			svc: "db", healthy: true, first: DNSNames,
			want: []want{{DNSNames, SeverityInfo, []string{"answers db.default.svc.cluster.local with a CNAME to db.example.com"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objects...)
			r, err := Diagnose(context.Background(), client, "default", tc.svc, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			if err := r.Write(&text); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + text.String())
			if r.Healthy != tc.healthy {
				t.Errorf("Healthy = %v, want %v", r.Healthy, tc.healthy)
			}
			if r.Healthy == slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == SeverityError }) {
				t.Errorf("Healthy = %v disagrees with the findings' severities", r.Healthy)
			}
			if tc.first != "" && (len(r.Findings) == 0 || r.Findings[0].Code != tc.first) {
				t.Errorf("first finding is not %s", tc.first)
			}
			for _, w := range tc.want {
				i := slices.IndexFunc(r.Findings, func(f Finding) bool { return f.Code == w.code })
				if i < 0 {
					t.Errorf("no finding %s", w.code)
					continue
				}
				f := r.Findings[i]
				if f.Severity != w.severity {
					t.Errorf("%s: severity %s, want %s", w.code, f.Severity, w.severity)
				}
				for _, s := range w.says {
					if !strings.Contains(f.Sentence, s) {
						t.Errorf("%s: sentence %q does not say %q", w.code, f.Sentence, s)
					}
				}
			}
			for _, c := range tc.absent {
				if slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Code == c }) {
					t.Errorf("unexpected finding %s", c)
				}
			}
			for i := 1; i < len(r.Findings); i++ {
				if r.Findings[i-1].Severity.rank() > r.Findings[i].Severity.rank() {
					t.Errorf("finding %d (%s) comes after a less severe one", i, r.Findings[i].Code)
				}
			}
		})
	}
}

// TestEvidence checks the facts of seed 003's typo and of a failing
// readiness probe: the selector, the near-miss pod's labels, the probe's
// message.
func TestEvidence(t *testing.T) {
	tmpl := map[string]string{"app": "nginx", "pod-template-hash": "5d8f"}
	client := fake.NewClientset(
		service("typo", map[string]string{"app": "ngnix"}),
		pod("default", "nginx-5d8f-a", "10.244.0.5", tmpl),
	)
	r, err := Diagnose(context.Background(), client, "", "typo", Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Findings[0].Evidence
	wantEv := []Evidence{
		{"selector", "app=ngnix"},
		{"pods in namespace default", "1"},
		{"pod nginx-5d8f-a (would match app=nginx)", "app=nginx,pod-template-hash=5d8f"},
	}
	if !slices.Equal(got, wantEv) {
		t.Errorf("evidence %v, want %v", got, wantEv)
	}

	nginx := map[string]string{"app": "nginx"}
	client = fake.NewClientset(
		service("web", nginx),
		notReady(pod("default", "web-1", "10.244.0.5", nginx), "ContainersNotReady", ""),
		event("Pod", "web-1", "spec.containers{web}", "Unhealthy", "Liveness probe failed: timeout", 1),
		event("Pod", "web-1", "spec.containers{web}", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503", 12),
	)
	r, err = Diagnose(context.Background(), client, "default", "web", Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(r.Findings, func(f Finding) bool { return f.Code == ReadinessProbeFailing })
	if i < 0 {
		t.Fatalf("no %s in %+v", ReadinessProbeFailing, r.Findings)
	}
	wantLine := "Warning Unhealthy: Readiness probe failed: HTTP probe failed with statuscode: 503 (12 times, last at 2026-01-02T03:04:05Z, from kubelet)"
	if e := r.Findings[i].Evidence; len(e) != 1 || e[0] != (Evidence{"pod web-1", wantLine}) {
		t.Errorf("evidence %v, want pod web-1: %s", e, wantLine)
	}
}

// TestDNS checks the records of a ClusterIP and of a headless Service.
func TestDNS(t *testing.T) {
	nginx := map[string]string{"app": "nginx"}
	headless := with(service("web", nginx), func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, nil })
	hostSlice := slice("web", "http", 8080, endpoint{pod: "web-0", ip: "10.244.0.5", node: "node-a"}, endpoint{pod: "web-1", ip: "10.244.0.6", node: "node-a"})
	hostSlice.Endpoints[0].Hostname = new("web-0")
	cases := []struct {
		name    string
		objects []runtime.Object
		want    []DNSRecord
	}{
		{
			name:    "cluster IP",
			objects: []runtime.Object{service("web", nginx), pod("default", "web-1", "10.244.0.5", nginx)},
			want: []DNSRecord{
				{Name: "web.default.svc.example.org", Type: "A", Answers: []string{"10.96.0.12"}},
				{Name: "_http._tcp.web.default.svc.example.org", Type: "SRV", Answers: []string{"80 web.default.svc.example.org"}},
			},
		},
		{
			name:    "headless",
			objects: []runtime.Object{headless, hostSlice},
			want: []DNSRecord{
				{Name: "web.default.svc.example.org", Type: "A", Answers: []string{"10.244.0.5", "10.244.0.6"}},
				{Name: "_http._tcp.web.default.svc.example.org", Type: "SRV", Answers: []string{"8080 10-244-0-6.web.default.svc.example.org", "8080 web-0.web.default.svc.example.org"}},
				{Name: "10-244-0-6.web.default.svc.example.org", Type: "A", Answers: []string{"10.244.0.6"}},
				{Name: "web-0.web.default.svc.example.org", Type: "A", Answers: []string{"10.244.0.5"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Diagnose(context.Background(), fake.NewClientset(tc.objects...), "default", "web", Options{ClusterDomain: "example.org."})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(r.DNS, tc.want, func(a, b DNSRecord) bool {
				return a.Name == b.Name && a.Type == b.Type && slices.Equal(a.Answers, b.Answers)
			}) {
				t.Errorf("DNS = %+v, want %+v", r.DNS, tc.want)
			}
		})
	}
}

// TestWrite checks the text rendering and the JSON of a report.
func TestWrite(t *testing.T) {
	r := &Report{
		Namespace: "default", Name: "web", Type: corev1.ServiceTypeClusterIP, ClusterIPs: []string{"10.96.0.12"},
		Selector: map[string]string{"app": "ngnix"},
		Findings: []Finding{
			{Severity: SeverityError, Code: SelectorMatchesNoPods, Sentence: "The selector matches nothing.", Evidence: []Evidence{{"selector", "app=ngnix"}}},
			{Severity: SeverityInfo, Code: DNSNames, Sentence: "Names."},
		},
	}
	var b bytes.Buffer
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := `Service default/web (ClusterIP, 10.96.0.12, selector app=ngnix): not healthy, 1 error, 0 warnings, 1 info

error SelectorMatchesNoPods: The selector matches nothing.
    selector: app=ngnix

info DNSNames: Names.
`
	if b.String() != want {
		t.Errorf("Write:\n%s\nwant:\n%s", b.String(), want)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"namespace":"default","name":"web","type":"ClusterIP","clusterIPs":["10.96.0.12"],"selector":{"app":"ngnix"},"healthy":false,` +
		`"findings":[{"severity":"error","code":"SelectorMatchesNoPods","sentence":"The selector matches nothing.","evidence":[{"name":"selector","value":"app=ngnix"}]},` +
		`{"severity":"info","code":"DNSNames","sentence":"Names."}]}`
	if string(js) != wantJSON {
		t.Errorf("JSON:\n%s\nwant:\n%s", js, wantJSON)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"ngnix", "nginx", 1}, {"web", "wbe", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"same", "same", 0},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestAPIError checks that a failing API call is an error that says which.
func TestAPIError(t *testing.T) {
	client := fake.NewClientset(service("web", map[string]string{"app": "nginx"}))
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is down")
	})
	_, err := Diagnose(context.Background(), client, "default", "web", Options{})
	if err == nil || err.Error() != "list pods of selector app=nginx in namespace default: etcd is down" {
		t.Errorf("err = %v, want the pod list's error with context", err)
	}
}
