package event

import (
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// ResourceV1 describes events at events.k8s.io/v1: the objects of
// Resource (stored as core/v1 Events under /registry/events/), converted on
// every read and write, validated with upstream's stricter events.k8s.io/v1
// rules on the converted object. Tables have the default NAME and AGE.
func ResourceV1() *registry.Resource {
	return &registry.Resource{
		Kind:           eventsv1.SchemeGroupVersion.WithKind("Event"),
		Resource:       "events",
		Singular:       "event",
		ShortNames:     []string{"ev"},
		Namespaced:     true,
		NameValidation: pathSegmentName,
		Strategy:       strategyV1{},
		Fields:         selectableFieldsV1,
		Storage: &registry.StorageVersion{
			Kind:        corev1.SchemeGroupVersion.WithKind("Event"),
			ToStorage:   ToCore,
			FromStorage: ToV1,
		},
	}
}

// ToCore converts an events.k8s.io/v1 Event to the core/v1 Event it is
// stored as, as upstream's Convert_v1_Event_To_core_Event.
func ToCore(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("expected *eventsv1.Event, got %T", obj)
	}
	in = in.DeepCopy()
	out := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Related:             in.Related,
		Reason:              in.Reason,
		Message:             in.Note,
		Type:                in.Type,
		Action:              in.Action,
		EventTime:           in.EventTime,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Source:              corev1.EventSource{Component: in.DeprecatedSource.Component, Host: in.DeprecatedSource.Host},
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}

// ToV1 converts a stored core/v1 Event to events.k8s.io/v1, as upstream's
// Convert_core_Event_To_v1_Event.
func ToV1(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("expected *corev1.Event, got %T", obj)
	}
	in = in.DeepCopy()
	out := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         corev1.EventSource{Component: in.Source.Component, Host: in.Source.Host},
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}

// strategyV1 validates the converted core Event as upstream's
// ValidateEventCreate/Update do for requests at events.k8s.io/v1.
type strategyV1 struct{ registry.Base }

func (strategyV1) Validate(obj runtime.Object) field.ErrorList {
	ev, err := ToCore(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validateV1Create(ev.(*corev1.Event))
}

func (strategyV1) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	ev, err := ToCore(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	oldEv, err := ToCore(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validateV1Update(ev.(*corev1.Event), oldEv.(*corev1.Event))
}

// validateV1Create is upstream's ValidateEventCreate for events.k8s.io/v1:
// the legacy rules plus a DNS subdomain name, a valid series, a set
// eventTime, a Normal or Warning type and no deprecated fields.
func validateV1Create(ev *corev1.Event) field.ErrorList {
	errs := validateEvent(ev)
	for _, msg := range validation.IsDNS1123Subdomain(ev.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), ev.Name, msg))
	}
	errs = append(errs, validateSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// validateV1Update is upstream's ValidateEventUpdate for events.k8s.io/v1:
// the legacy rules, a valid series if it changed, and everything else
// immutable (eventTime to the microsecond).
func validateV1Update(ev, old *corev1.Event) field.ErrorList {
	errs := validateEvent(ev)
	if !reflect.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, validateSeries(ev)...)
	}
	immutable := func(name string, a, b interface{}) {
		if !equality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Invalid(field.NewPath(name), a, "field is immutable"))
		}
	}
	immutable("involvedObject", ev.InvolvedObject, old.InvolvedObject)
	immutable("reason", ev.Reason, old.Reason)
	immutable("message", ev.Message, old.Message)
	immutable("source", ev.Source, old.Source)
	immutable("firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp)
	immutable("lastTimestamp", ev.LastTimestamp, old.LastTimestamp)
	immutable("count", ev.Count, old.Count)
	immutable("type", ev.Type, old.Type)
	if !ev.EventTime.Truncate(time.Microsecond).UTC().Equal(old.EventTime.Truncate(time.Microsecond).UTC()) {
		immutable("eventTime", ev.EventTime, old.EventTime)
	}
	immutable("action", ev.Action, old.Action)
	immutable("related", ev.Related, old.Related)
	immutable("reportingController", ev.ReportingController, old.ReportingController)
	immutable("reportingInstance", ev.ReportingInstance, old.ReportingInstance)
	return errs
}

// validateSeries is upstream's validateV1EventSeries.
func validateSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series == nil {
		return nil
	}
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}

// selectableFieldsV1 are upstream's events.k8s.io/v1 field labels.
func selectableFieldsV1(obj runtime.Object) fields.Set {
	if v1, ok := obj.(*eventsv1.Event); ok {
		c, _ := ToCore(v1)
		obj = c
	}
	ev := obj.(*corev1.Event)
	o := ev.InvolvedObject
	return fields.Set{
		"regarding.kind":            o.Kind,
		"regarding.namespace":       o.Namespace,
		"regarding.name":            o.Name,
		"regarding.uid":             string(o.UID),
		"regarding.apiVersion":      o.APIVersion,
		"regarding.resourceVersion": o.ResourceVersion,
		"regarding.fieldPath":       o.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"type":                      ev.Type,
	}
}
