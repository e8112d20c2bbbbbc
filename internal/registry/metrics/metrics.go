// Package metrics is metrics.k8s.io/v1beta1: NodeMetrics and PodMetrics,
// read-only views (registry.View) of what a Source last measured, as
// metrics-server serves them: nothing is stored, get and list are the only
// verbs, and an object without measurements is not found.
package metrics

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/svcnet/svcnet/internal/registry"
)

// Source is what the views read: the latest usage of nodes and pods.
type Source interface {
	Nodes() []metricsv1beta1.NodeMetrics
	// Pods are those of namespace, or of every namespace for "".
	Pods(namespace string) []metricsv1beta1.PodMetrics
}

// Resources describes nodes and pods of metrics.k8s.io, read from src.
func Resources(src Source) []*registry.Resource {
	gv := metricsv1beta1.SchemeGroupVersion
	nodes := func() []runtime.Object {
		var out []runtime.Object
		for _, m := range src.Nodes() {
			out = append(out, &m)
		}
		return out
	}
	pods := func(ns string) []runtime.Object {
		var out []runtime.Object
		for _, m := range src.Pods(ns) {
			out = append(out, &m)
		}
		return out
	}
	// metrics-server's errors name the kinds, not the resources.
	nodeGR := gv.WithResource("nodemetrics").GroupResource()
	podGR := gv.WithResource("podmetrics").GroupResource()
	return []*registry.Resource{{
		Kind:     gv.WithKind("NodeMetrics"),
		Resource: "nodes",
		View: &registry.View{
			Get: func(_ context.Context, _, name string) (runtime.Object, error) {
				return find(nodes(), name, apierrors.NewNotFound(nodeGR, name))
			},
			List: func(context.Context, string) ([]runtime.Object, error) { return nodes(), nil },
		},
		Columns: columns(func(o runtime.Object) (corev1.ResourceList, metav1.Duration) {
			m := o.(*metricsv1beta1.NodeMetrics)
			return m.Usage, m.Window
		}),
	}, {
		Kind:       gv.WithKind("PodMetrics"),
		Resource:   "pods",
		Namespaced: true,
		View: &registry.View{
			Get: func(_ context.Context, ns, name string) (runtime.Object, error) {
				// metrics-server's message names the pod with its namespace.
				return find(pods(ns), name, apierrors.NewNotFound(podGR, ns+"/"+name))
			},
			List: func(_ context.Context, ns string) ([]runtime.Object, error) { return pods(ns), nil },
		},
		Columns: columns(func(o runtime.Object) (corev1.ResourceList, metav1.Duration) {
			m := o.(*metricsv1beta1.PodMetrics)
			return PodUsage(m), m.Window
		}),
	}}
}

// find is the object of objs named name, or notFound.
func find(objs []runtime.Object, name string, notFound error) (runtime.Object, error) {
	for _, o := range objs {
		if o.(metav1.Object).GetName() == name {
			return o, nil
		}
	}
	return nil, notFound
}

// PodUsage sums a pod's containers.
func PodUsage(m *metricsv1beta1.PodMetrics) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range m.Containers {
		for name, q := range c.Usage {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	return sum
}

// columns are metrics-server's: NAME, CPU, MEMORY and WINDOW.
func columns(usage func(runtime.Object) (corev1.ResourceList, metav1.Duration)) []registry.Column {
	cell := func(name corev1.ResourceName) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} {
			u, _ := usage(o)
			q := u[name]
			return formatQuantity(name, q)
		}
	}
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "CPU", Type: "string", Description: "CPU usage"}, Cell: cell(corev1.ResourceCPU)},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Memory", Type: "string", Description: "Memory usage"}, Cell: cell(corev1.ResourceMemory)},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Window", Type: "string", Description: "CPU usage window size"},
			Cell: func(o runtime.Object) interface{} { _, w := usage(o); return w.Duration.String() }},
	}
}

// formatQuantity prints CPU in millicores and memory in Ki, as
// metrics-server's table.
func formatQuantity(name corev1.ResourceName, q resource.Quantity) string {
	if name == corev1.ResourceCPU {
		return fmt.Sprintf("%dm", q.MilliValue())
	}
	return fmt.Sprintf("%dKi", q.Value()/1024)
}
