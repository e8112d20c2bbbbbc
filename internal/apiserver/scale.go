package apiserver

import (
	"errors"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
)

// scaleOf is the autoscaling/v1 Scale view of a scalable object.
func scaleOf(obj runtime.Object, res *registry.Resource) *autoscalingv1.Scale {
	a, _ := meta.Accessor(obj)
	spec, status, sel := res.Scale.Get(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: a.GetName(), Namespace: a.GetNamespace(), UID: a.GetUID(),
			ResourceVersion: a.GetResourceVersion(), CreationTimestamp: a.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: sel},
	}
}

// applyScale writes a submitted Scale's replicas into the parent object;
// the Scale's resourceVersion, when set, is a precondition on the parent.
func applyScale(res *registry.Resource, sc *autoscalingv1.Scale) mutateFunc {
	return func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, apierrors.NewNotFound(res.GroupResource(), sc.Name)
		}
		if sc.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), sc.Name,
				fieldErrors("spec.replicas", sc.Spec.Replicas, "must be greater than or equal to 0"))
		}
		if sc.ResourceVersion != "" && sc.ResourceVersion != rvString(cur) {
			return nil, apierrors.NewConflict(res.GroupResource(), sc.Name, errors.New(optimisticLockMsg))
		}
		res.Scale.Set(cur, sc.Spec.Replicas)
		meta.NewAccessor().SetResourceVersion(cur, sc.ResourceVersion)
		return cur, nil
	}
}

// setNamespaceFinalizers copies spec.finalizers of a submitted namespace.
func setNamespaceFinalizers(dst, src runtime.Object) {
	d, ok1 := dst.(*corev1.Namespace)
	s, ok2 := src.(*corev1.Namespace)
	if ok1 && ok2 {
		d.Spec.Finalizers = s.Spec.Finalizers
	}
}
