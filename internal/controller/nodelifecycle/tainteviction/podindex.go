package tainteviction

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeNameIndex is upstream's index of pods by spec.nodeName.
const nodeNameIndex = "spec.nodeName"

// PodsByNode indexes a pod informer by spec.nodeName, unless it already
// is, and returns the lookup of the pods assigned to a node. It must be
// called before the informer starts.
func PodsByNode(inf cache.SharedIndexInformer) (func(node string) ([]*corev1.Pod, error), error) {
	if _, ok := inf.GetIndexer().GetIndexers()[nodeNameIndex]; !ok {
		err := inf.AddIndexers(cache.Indexers{nodeNameIndex: func(obj any) ([]string, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				return nil, nil
			}
			return []string{pod.Spec.NodeName}, nil
		}})
		if err != nil {
			return nil, fmt.Errorf("index pods by node: %w", err)
		}
	}
	return func(node string) ([]*corev1.Pod, error) {
		objs, err := inf.GetIndexer().ByIndex(nodeNameIndex, node)
		if err != nil {
			return nil, fmt.Errorf("pods of node %s: %w", node, err)
		}
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, obj := range objs {
			if pod, ok := obj.(*corev1.Pod); ok {
				pods = append(pods, pod)
			}
		}
		return pods, nil
	}, nil
}
