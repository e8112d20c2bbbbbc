// Package prioritylevelconfiguration is the flowcontrol.apiserver.k8s.io/v1
// PriorityLevelConfiguration strategy, as kube-apiserver's
// (pkg/registry/flowcontrol/prioritylevelconfiguration and
// pkg/apis/flowcontrol/validation, with its beta declarative validation
// enforced): upstream's defaults (nominalConcurrencyShares 30,
// lendablePercent 0, queues 64, handSize 8, queueLengthLimit 50), type
// Exempt (only for "exempt") or Limited with the matching member, shares
// and percentages in range, a queuing configuration with positive sizes
// and a hand that fits the deck, and the mandatory levels ("exempt",
// "catch-all") with their fixed spec. Status is a subresource; spec
// changes bump the generation. The columns are upstream's: TYPE,
// NOMINALCONCURRENCYSHARES, QUEUES, HANDSIZE, QUEUELENGTHLIMIT, AGE.
//
// The objects are served only: svcnet's API server does no API Priority
// and Fairness.
package prioritylevelconfiguration

import (
	"context"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
)

// Upstream's defaults (pkg/apis/flowcontrol/v1/defaults.go).
const (
	DefaultHandSize                 int32 = 8
	DefaultQueues                   int32 = 64
	DefaultQueueLengthLimit         int32 = 50
	DefaultNominalConcurrencyShares int32 = 30
)

// maxQueues is upstream's priorityLevelConfigurationQueuingMaxQueues.
const maxQueues int32 = 10 * 1000 * 1000

// Resource describes prioritylevelconfigurations.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       flowcontrolv1.SchemeGroupVersion.WithKind("PriorityLevelConfiguration"),
		Resource:   "prioritylevelconfigurations",
		Singular:   "prioritylevelconfiguration",
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Type", Type: "string",
				Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]},
				Cell: func(o runtime.Object) interface{} {
					return string(o.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Type)
				}},
			limitedColumn("NominalConcurrencyShares", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"],
				func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) interface{} {
					return ptr.Deref(l.NominalConcurrencyShares, 0)
				}),
			queuingColumn("Queues", "queues", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.Queues }),
			queuingColumn("HandSize", "handSize", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.HandSize }),
			queuingColumn("QueueLengthLimit", "queueLengthLimit", func(q *flowcontrolv1.QueuingConfiguration) int32 { return q.QueueLengthLimit }),
			registry.AgeColumn(),
		},
	}
}

// limitedColumn shows cell of a Limited level, "<none>" for others.
func limitedColumn(name, desc string, cell func(*flowcontrolv1.LimitedPriorityLevelConfiguration) interface{}) registry.Column {
	return registry.Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: "string", Description: desc},
		Cell: func(o runtime.Object) interface{} {
			if l := o.(*flowcontrolv1.PriorityLevelConfiguration).Spec.Limited; l != nil {
				return cell(l)
			}
			return "<none>"
		}}
}

// queuingColumn shows a field of a queuing Limited level, "<none>" for
// others.
func queuingColumn(name, doc string, get func(*flowcontrolv1.QueuingConfiguration) int32) registry.Column {
	return limitedColumn(name, flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()[doc],
		func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) interface{} {
			if q := l.LimitResponse.Queuing; q != nil {
				return get(q)
			}
			return "<none>"
		})
}

type strategy struct{ registry.Base }

// Default is upstream's SetObjectDefaults_PriorityLevelConfiguration.
func (strategy) Default(obj runtime.Object) {
	SetDefaults(obj.(*flowcontrolv1.PriorityLevelConfiguration))
}

// SetDefaults is upstream's SetObjectDefaults_PriorityLevelConfiguration:
// a Limited level's nominalConcurrencyShares is 30 and its lendablePercent
// 0, its queuing 64 queues, hands of 8 and 50 requests a queue; an Exempt
// level's shares and lendablePercent are 0.
func SetDefaults(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(DefaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To[int32](0)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = DefaultHandSize
			}
			if q.Queues == 0 {
				q.Queues = DefaultQueues
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = DefaultQueueLengthLimit
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To[int32](0)
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To[int32](0)
		}
	}
}

// PrepareForStatusUpdate keeps the stored labels, annotations, finalizers
// and owner references: upstream's status strategy keeps all the stored
// metadata but the managed fields.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	m, prev := &obj.(*flowcontrolv1.PriorityLevelConfiguration).ObjectMeta, &old.(*flowcontrolv1.PriorityLevelConfiguration).ObjectMeta
	m.Labels, m.Annotations, m.Finalizers, m.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

// Validate is upstream's ValidatePriorityLevelConfiguration (without the
// object metadata, which the API server checks for every kind) with its
// declarative validation.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	return merge(handwritten(pl), declarative(pl, nil))
}

// ValidateUpdate is the same of the new object; the declarative rules
// skip an unchanged spec.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	return merge(handwritten(pl), declarative(pl, old.(*flowcontrolv1.PriorityLevelConfiguration)))
}

// mandatory are the spec-fixed levels by name.
var mandatory = func() map[string]*flowcontrolv1.PriorityLevelConfiguration {
	m := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations {
		m[pl.Name] = pl
	}
	return m
}()

func handwritten(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	// The v1beta3 round-trip annotation is forbidden at v1.
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	specPath := field.NewPath("spec")
	errs = append(errs, validateSpec(&pl.Spec, pl.Name, specPath)...)
	errs = append(errs, validateMandatory(pl, specPath)...)
	return append(errs, validateStatus(&pl.Status, field.NewPath("status"))...)
}

// validateMandatory is upstream's
// ValidateIfMandatoryPriorityLevelConfigurationObject: a mandatory level
// keeps its fixed spec, but for the exempt member of "exempt".
func validateMandatory(pl *flowcontrolv1.PriorityLevelConfiguration, path *field.Path) field.ErrorList {
	mand, ok := mandatory[pl.Name]
	if !ok {
		return nil
	}
	want := mand.DeepCopy()
	SetDefaults(want)
	have := pl.Spec.DeepCopy()
	msg := fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
	if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
		have.Exempt = want.Spec.Exempt
		msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
	}
	if !apiequality.Semantic.DeepEqual(&want.Spec, have) {
		return field.ErrorList{field.Invalid(path, pl.Spec, msg)}
	}
	return nil
}

func validateSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(path.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(path.Child("limited"), "must be nil if the type is not Limited").MarkCoveredByDeclarative())
		}
		if e := spec.Exempt; e != nil {
			p := path.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			if e.LendablePercent != nil && (*e.LendablePercent < 0 || *e.LendablePercent > 100) {
				errs = append(errs, field.Invalid(p.Child("lendablePercent"), *e.LendablePercent, "must be between 0 and 100, inclusive"))
			}
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(path.Child("exempt"), "must be nil if the type is Limited").MarkCoveredByDeclarative())
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(path.Child("limited"), "must not be empty when type is Limited").MarkCoveredByDeclarative())
		} else {
			errs = append(errs, validateLimited(spec.Limited, path.Child("limited"))...)
		}
	default:
		if spec.Type == "" {
			errs = append(errs, field.Required(path.Child("type"), "").MarkCoveredByDeclarative())
		} else {
			errs = append(errs, field.NotSupported(path.Child("type"), spec.Type, []string{
				string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}))
		}
	}
	return errs
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Upstream checks its internal type, where missing shares are 0.
	if s := ptr.Deref(l.NominalConcurrencyShares, 0); s < 0 {
		errs = append(errs, field.Invalid(path.Child("nominalConcurrencyShares"), s, "must be a non-negative integer"))
	}
	errs = append(errs, validateLimitResponse(l.LimitResponse, path.Child("limitResponse"))...)
	if p := l.LendablePercent; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, field.Invalid(path.Child("lendablePercent"), *p, "must be between 0 and 100, inclusive"))
	}
	if p := l.BorrowingLimitPercent; p != nil && *p < 0 {
		errs = append(errs, field.Invalid(path.Child("borrowingLimitPercent"), *p, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateLimitResponse(lr flowcontrolv1.LimitResponse, path *field.Path) field.ErrorList {
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			return field.ErrorList{field.Forbidden(path.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited").MarkCoveredByDeclarative()}
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			return field.ErrorList{field.Required(path.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited").MarkCoveredByDeclarative()}
		}
		return validateQueuing(lr.Queuing, path.Child("queuing"))
	default:
		if lr.Type == "" {
			return field.ErrorList{field.Required(path.Child("type"), "").MarkCoveredByDeclarative()}
		}
		return field.ErrorList{field.NotSupported(path.Child("type"), lr.Type, []string{
			string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)})}
	}
	return nil
}

func validateQueuing(q *flowcontrolv1.QueuingConfiguration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(path.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(path.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(path.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(path.Child("handSize"), q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(path.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	default:
		if entropy := shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)); entropy > shufflesharding.MaxHashBits {
			errs = append(errs, field.Invalid(path.Child("handSize"), q.HandSize,
				fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
		}
	}
	return errs
}

func validateStatus(status *flowcontrolv1.PriorityLevelConfigurationStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[flowcontrolv1.PriorityLevelConfigurationConditionType]bool{}
	for i, c := range status.Conditions {
		p := path.Child("conditions").Index(i)
		if seen[c.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
		}
		seen[c.Type] = true
		if c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
	}
	return errs
}

// declarative is upstream's generated Validate_PriorityLevelConfiguration
// with its beta rules enforced: spec.type is required, spec.exempt and
// spec.limited are members discriminated by it (limited required for
// Limited, each forbidden for other types), and so are a Limited level's
// limitResponse.type and queuing (required for Queue). An update whose
// spec is unchanged is not checked again.
func declarative(pl, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	if old != nil && apiequality.Semantic.DeepEqual(pl.Spec, old.Spec) {
		return nil
	}
	var errs field.ErrorList
	spec, path := &pl.Spec, field.NewPath("spec")
	if spec.Type != flowcontrolv1.PriorityLevelEnablementExempt && spec.Exempt != nil {
		errs = append(errs, field.Forbidden(path.Child("exempt"), "").MarkBeta())
	}
	switch {
	case spec.Type == flowcontrolv1.PriorityLevelEnablementLimited && spec.Limited == nil:
		errs = append(errs, field.Required(path.Child("limited"), "").MarkBeta())
	case spec.Type != flowcontrolv1.PriorityLevelEnablementLimited && spec.Limited != nil:
		errs = append(errs, field.Forbidden(path.Child("limited"), "").MarkBeta())
	}
	if spec.Type == "" {
		errs = append(errs, field.Required(path.Child("type"), "").MarkBeta())
	}
	if l := spec.Limited; l != nil {
		lr, p := l.LimitResponse, path.Child("limited", "limitResponse")
		switch {
		case lr.Type == flowcontrolv1.LimitResponseTypeQueue && lr.Queuing == nil:
			errs = append(errs, field.Required(p.Child("queuing"), "").MarkBeta())
		case lr.Type != flowcontrolv1.LimitResponseTypeQueue && lr.Queuing != nil:
			errs = append(errs, field.Forbidden(p.Child("queuing"), "").MarkBeta())
		}
		if lr.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "").MarkBeta())
		}
	}
	return errs
}

// merge is what upstream's ValidateDeclarativelyWithMigrationChecks does
// with the two lists when beta declarative validation is enforced: the
// handwritten errors a declarative one covers give way to it, and the
// declarative errors come last.
func merge(handwritten, declarativeErrs field.ErrorList) field.ErrorList {
	errs := validate.FilterCoveredHandwrittenErrors(context.Background(), handwritten, declarativeErrs, true)
	return append(errs, declarativeErrs...)
}
