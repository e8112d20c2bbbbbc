package horizontalpodautoscaler

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
)

// ResourceV1 describes horizontalpodautoscalers at autoscaling/v1: the
// objects of Resource, stored at autoscaling/v2 and converted on every
// read and write, with v1's defaults and then v2's rules, and v2's columns.
func ResourceV1() *registry.Resource {
	r := Resource()
	r.Kind = autoscalingv1.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
	r.Strategy = strategyV1{}
	r.Storage = &registry.StorageVersion{
		Kind:        autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		ToStorage:   toStorage,
		FromStorage: ToV1,
	}
	for i, c := range r.Columns {
		cell := c.Cell
		r.Columns[i].Cell = func(o runtime.Object) interface{} {
			v2, err := toStorage(o)
			if err != nil {
				return ""
			}
			return cell(v2)
		}
	}
	return r
}

// toStorage is a v1 object as stored: converted to v2, with v2's
// defaults.
func toStorage(obj runtime.Object) (runtime.Object, error) {
	v2, err := ToV2(obj)
	if err != nil {
		return nil, err
	}
	strategy{}.Default(v2)
	return v2, nil
}

// strategyV1 applies v1's defaults, then validates the object as v2 does
// once converted, as upstream validates every version's object alike.
type strategyV1 struct{ registry.Base }

// Default follows upstream's v1 SetDefaults_HorizontalPodAutoscaler.
func (strategyV1) Default(obj runtime.Object) {
	spec := &obj.(*autoscalingv1.HorizontalPodAutoscaler).Spec
	if spec.MinReplicas == nil {
		spec.MinReplicas = ptr.To[int32](1)
	}
}

func (strategyV1) Validate(obj runtime.Object) field.ErrorList {
	v2, err := toStorage(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return strategy{}.Validate(v2)
}

func (strategyV1) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	v2, err := toStorage(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	oldV2, err := toStorage(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return strategy{}.ValidateUpdate(v2, oldV2)
}
