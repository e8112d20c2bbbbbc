package node

import (
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller/attachdetach"
	"github.com/svcnet/svcnet/internal/podutil"
)

// Attachment, as the kubelet with controller-managed attachment: a
// claim's volume is mounted only once the attach/detach controller lists
// its PV in this Node's status.volumesAttached (see
// internal/controller/attachdetach, which refuses a ReadWriteOnce volume
// to a second node with the Multi-Attach event). Until then the pod waits
// in ContainerCreating without an event of the node's own (the
// controller's event says why), and its worker is poked as soon as the
// Node's attached volumes change.

// errNotAttached is a claim's volume waiting to be attached to this node.
var errNotAttached = errors.New("volume is not yet attached to the node")

// attached tells whether pv is attached to this node.
func (a *Agent) attached(pv *corev1.PersistentVolume) bool {
	n, err := a.nodeLister.Get(a.cfg.NodeName)
	if err != nil {
		return false
	}
	name := attachdetach.UniqueVolumeName(pv)
	return slices.ContainsFunc(n.Status.VolumesAttached, func(v corev1.AttachedVolume) bool { return v.Name == name })
}

// attachHandler pokes the pods with claims when this Node's attached
// volumes change.
func (a *Agent) attachHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*corev1.Node)
			cur, ok2 := obj.(*corev1.Node)
			if !ok1 || !ok2 || cur.Name != a.cfg.NodeName || slices.Equal(old.Status.VolumesAttached, cur.Status.VolumesAttached) {
				return
			}
			for _, p := range listPods(a.podLister) {
				if len(podutil.Claims(p)) > 0 {
					a.podChanged(p)
				}
			}
		},
	}
}
