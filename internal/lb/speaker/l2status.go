package speaker

import (
	"context"
	"log/slog"
	"reflect"

	"go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// MetalLB's labels of a ServiceL2Status: the announcing node and the
// Service.
const (
	labelNode             = "metallb.io/node"
	labelServiceName      = "metallb.io/service-name"
	labelServiceNamespace = "metallb.io/service-namespace"
)

var serviceL2Statuses = v1beta1.GroupVersion.WithResource("servicel2statuses")

// l2Status keeps one ServiceL2Status in metallb-system per Service the
// node announces, as MetalLB's speaker does (named l2-<random>, labelled
// with the node and the Service), and deletes the node's others. MetalLB
// makes the speaker's pod their owner; here it is the Node, so that they
// go with it.
type l2Status struct {
	client dynamic.ResourceInterface
	node   string
	log    *slog.Logger
	// written are the statuses as last written, by Service key, with the
	// object's name; nil until the node's existing ones were listed.
	written map[string]written
}

type written struct {
	name   string
	status v1beta1.MetalLBServiceL2Status
}

func newL2Status(client dynamic.Interface, node string, log *slog.Logger) *l2Status {
	return &l2Status{client: client.Resource(serviceL2Statuses).Namespace(metallb.Namespace), node: node, log: log}
}

// sync writes the statuses of the announced Services; owner is the
// node's Node (nil until it is registered).
func (l *l2Status) sync(ctx context.Context, announced map[string]Choice, owner *corev1.Node) {
	if l.written == nil && !l.adopt(ctx) {
		return
	}
	for key, w := range l.written {
		if _, ok := announced[key]; ok {
			continue
		}
		err := l.client.Delete(ctx, w.name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			l.log.Warn("delete ServiceL2Status", "name", w.name, "service", key, "err", err)
			continue
		}
		delete(l.written, key)
	}
	for key, c := range announced {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		want := v1beta1.MetalLBServiceL2Status{Node: l.node, ServiceName: name, ServiceNamespace: ns}
		for _, name := range c.Interfaces {
			want.Interfaces = append(want.Interfaces, v1beta1.InterfaceInfo{Name: name})
		}
		if w, ok := l.written[key]; ok && reflect.DeepEqual(w.status, want) {
			continue
		}
		if err := l.write(ctx, key, want, owner); err != nil {
			l.log.Warn("write ServiceL2Status", "service", key, "err", err)
		}
	}
}

// adopt lists the node's statuses left from before; it says whether it
// could.
func (l *l2Status) adopt(ctx context.Context) bool {
	list, err := l.client.List(ctx, metav1.ListOptions{LabelSelector: labelNode + "=" + l.node})
	if err != nil {
		l.log.Warn("list ServiceL2Statuses", "err", err)
		return false
	}
	l.written = map[string]written{}
	for _, u := range list.Items {
		var s v1beta1.ServiceL2Status
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
			continue
		}
		key := s.Labels[labelServiceNamespace] + "/" + s.Labels[labelServiceName]
		if _, dup := l.written[key]; dup {
			_ = l.client.Delete(ctx, s.Name, metav1.DeleteOptions{})
			continue
		}
		l.written[key] = written{name: s.Name, status: s.Status}
	}
	return true
}

// write creates the Service's status object if there is none, then sets
// its status (a subresource, which a create leaves out). As the one
// announcing node, it deletes the Service's statuses of other nodes
// (left by a node that stopped before it could).
func (l *l2Status) write(ctx context.Context, key string, want v1beta1.MetalLBServiceL2Status, owner *corev1.Node) error {
	others, err := l.client.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{
		labelServiceName: want.ServiceName, labelServiceNamespace: want.ServiceNamespace}).String()})
	if err != nil {
		return err
	}
	for _, o := range others.Items {
		if o.GetLabels()[labelNode] == l.node {
			continue
		}
		if err := l.client.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	w, ok := l.written[key]
	var obj *unstructured.Unstructured
	if ok {
		obj, err = l.client.Get(ctx, w.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			ok = false
		} else if err != nil {
			return err
		}
	}
	if !ok {
		s := &v1beta1.ServiceL2Status{
			TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.GroupVersion.String(), Kind: "ServiceL2Status"},
			ObjectMeta: metav1.ObjectMeta{GenerateName: "l2-", Namespace: metallb.Namespace,
				Labels: map[string]string{labelNode: l.node, labelServiceName: want.ServiceName, labelServiceNamespace: want.ServiceNamespace}},
		}
		if owner != nil {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return err
		}
		if obj, err = l.client.Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
			return err
		}
		l.written[key] = written{name: obj.GetName()}
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&want)
	if err != nil {
		return err
	}
	obj.Object["status"] = status
	if _, err := l.client.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return err
	}
	l.written[key] = written{name: obj.GetName(), status: want}
	return nil
}
