// Package event is the core/v1 Event strategy: upstream's legacy event
// validation (the involved object's namespace must match; new-style events
// need a reporting controller, instance, action and reason), the field
// selectors `kubectl describe` uses, and the ten columns of `kubectl get
// events`.
package event

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Length limits of new-style events.
const (
	maxReportingInstance = 128
	maxAction            = 128
	maxReason            = 128
	maxNote              = 1024
)

// Resource describes events.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("Event"),
		Resource:   "events",
		Singular:   "event",
		ShortNames: []string{"ev"},
		Namespaced: true,
		// core/v1 events only need a name that is a valid path segment
		NameValidation: pathSegmentName,
		Strategy:       strategy{},
		Columns:        columns(),
		Fields:         selectableFields,
	}
}

// pathSegmentName accepts any name usable in a URL path segment.
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

type strategy struct{ registry.Base }

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateEvent(obj.(*corev1.Event))
}

// ValidateUpdate checks the new object as on create.
func (s strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return s.Validate(obj)
}

// validateEvent is upstream's legacy event validation, all that core/v1
// requests get.
func validateEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace")
	if ev.EventTime.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			// cluster-scoped objects: the event lives in "" or "default"
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, mismatch)
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, mismatch)
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, mismatch)
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		errs = append(errs, requiredMax("reportingInstance", ev.ReportingInstance, maxReportingInstance)...)
		errs = append(errs, requiredMax("action", ev.Action, maxAction)...)
		errs = append(errs, requiredMax("reason", ev.Reason, maxReason)...)
		if len(ev.Message) > maxNote {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", maxNote)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func requiredMax(name, value string, limit int) field.ErrorList {
	p := field.NewPath(name)
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(p, ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(p, "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}

// selectableFields are the event fields upstream's field selectors know;
// "source" falls back to the reporting controller.
func selectableFields(obj runtime.Object) fields.Set {
	ev := obj.(*corev1.Event)
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	o := ev.InvolvedObject
	return fields.Set{
		"involvedObject.kind":            o.Kind,
		"involvedObject.namespace":       o.Namespace,
		"involvedObject.name":            o.Name,
		"involvedObject.uid":             string(o.UID),
		"involvedObject.apiVersion":      o.APIVersion,
		"involvedObject.resourceVersion": o.ResourceVersion,
		"involvedObject.fieldPath":       o.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}

func columns() []registry.Column {
	doc := corev1.Event{}.SwaggerDoc()
	cell := func(f func(*corev1.Event) interface{}) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} { return f(o.(*corev1.Event)) }
	}
	name := registry.NameColumn()
	name.Priority = 1
	return []registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
			Cell: cell(func(e *corev1.Event) interface{} { return lastSeen(e) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Type", Type: "string", Description: doc["type"]},
			Cell: cell(func(e *corev1.Event) interface{} { return e.Type })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Reason", Type: "string", Description: doc["reason"]},
			Cell: cell(func(e *corev1.Event) interface{} { return e.Reason })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Object", Type: "string", Description: doc["involvedObject"]},
			Cell: cell(func(e *corev1.Event) interface{} {
				kind := strings.ToLower(e.InvolvedObject.Kind)
				if e.InvolvedObject.Name == "" {
					return kind
				}
				return kind + "/" + e.InvolvedObject.Name
			})},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Subobject", Type: "string", Priority: 1,
			Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
			Cell: cell(func(e *corev1.Event) interface{} { return e.InvolvedObject.FieldPath })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
			Cell: cell(func(e *corev1.Event) interface{} { return source(e) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Message", Type: "string", Description: doc["message"]},
			Cell: cell(func(e *corev1.Event) interface{} { return strings.TrimSpace(e.Message) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
			Cell: cell(func(e *corev1.Event) interface{} { return firstSeen(e) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
			Cell: cell(func(e *corev1.Event) interface{} { return count(e) })},
		name,
	}
}

// firstSeen is the age of firstTimestamp, or of eventTime for new-style
// events.
func firstSeen(e *corev1.Event) string {
	if e.FirstTimestamp.IsZero() {
		return registry.Age(metav1.NewTime(e.EventTime.Time))
	}
	return registry.Age(e.FirstTimestamp)
}

// lastSeen is the age of the last occurrence: the series' last
// observation, lastTimestamp, or else the first occurrence.
func lastSeen(e *corev1.Event) string {
	switch {
	case e.Series != nil:
		return registry.Age(metav1.NewTime(e.Series.LastObservedTime.Time))
	case e.LastTimestamp.IsZero():
		return firstSeen(e)
	}
	return registry.Age(e.LastTimestamp)
}

// count is the series count, the legacy count, or 1 for a singleton.
func count(e *corev1.Event) int64 {
	switch {
	case e.Series != nil:
		return int64(e.Series.Count)
	case e.Count == 0:
		return 1
	}
	return int64(e.Count)
}

// source is "component, host", falling back to the reporting controller
// and instance.
func source(e *corev1.Event) string {
	component, host := e.Source.Component, e.Source.Host
	if component == "" {
		component = e.ReportingController
	}
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
