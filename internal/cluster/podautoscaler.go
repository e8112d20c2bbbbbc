package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/podautoscaler"
)

// startPodAutoscaler starts the horizontal-pod-autoscaler controller with
// its own clients, as upstream's: the scale subresource of any kind
// discovery maps, and the metrics.k8s.io client.
func startPodAutoscaler(ctx context.Context, o *ControllerManagerOptions, cl *clients, d controller.Deps) (func(context.Context), error) {
	cfg := cl.configFor(podautoscaler.ControllerName)
	// Scales and metrics travel as JSON.
	cfg.ContentType, cfg.AcceptContentTypes = "", ""
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d.Client.Discovery()))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(d.Client.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("scale client: %w", err)
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metrics client: %w", err)
	}
	list := func(ctx context.Context, ns string, sel labels.Selector) ([]metricsv1beta1.PodMetrics, error) {
		l, err := mc.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	c, err := podautoscaler.New(ctx, d, scales, mapper, list, o.PodAutoscaler)
	return runOf(c, err)
}
