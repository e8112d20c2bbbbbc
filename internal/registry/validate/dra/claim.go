package dra

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// requestRefMessage is the error for a reference to no request of the claim.
const requestRefMessage = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

// requestNames maps the name of each request of a claim to the names of
// its subrequests (none for a request of exactly one kind of device).
type requestNames map[string]map[string]bool

func requestNamesOf(claim *resourceapi.DeviceClaim) requestNames {
	names := make(requestNames, len(claim.Requests))
	for _, request := range claim.Requests {
		var subs map[string]bool
		if len(request.FirstAvailable) > 0 {
			subs = make(map[string]bool, len(request.FirstAvailable))
			for _, sub := range request.FirstAvailable {
				subs[sub.Name] = true
			}
		}
		names[request.Name] = subs
	}
	return names
}

// has reports whether ref names a request or a "request/subrequest".
func (n requestNames) has(ref string) bool {
	request, sub, isSub := strings.Cut(ref, "/")
	subs, found := n[request]
	if !found || !isSub {
		return found
	}
	return subs[sub]
}

// requestRef checks a reference from a constraint, a config or an
// allocation result to a request or subrequest of the claim.
func requestRef(ref string, names requestNames, path *field.Path) field.ErrorList {
	segments := strings.Split(ref, "/")
	if len(segments) > 2 {
		return field.ErrorList{field.Invalid(path, ref, requestRefMessage)}
	}
	var errs field.ErrorList
	for _, segment := range segments {
		errs = append(errs, label(segment, path)...)
	}
	if !names.has(ref) {
		errs = append(errs, field.Invalid(path, ref, requestRefMessage))
	}
	return errs
}

// constraintTargets maps what a constraint applies to ("" for the whole
// claim, a request or a "request/subrequest") to the attributes it
// matches or keeps distinct there.
type constraintTargets map[string]map[string]bool

func constraintTargetsOf(constraints []resourceapi.DeviceConstraint) constraintTargets {
	targets := make(constraintTargets)
	add := func(target, attribute string) {
		if targets[target] == nil {
			targets[target] = make(map[string]bool)
		}
		targets[target][attribute] = true
	}
	for _, constraint := range constraints {
		attribute := constraint.MatchAttribute
		if attribute == nil {
			attribute = constraint.DistinctAttribute
		}
		if attribute == nil {
			continue
		}
		if len(constraint.Requests) == 0 {
			add("", string(*attribute))
		}
		for _, request := range constraint.Requests {
			add(request, string(*attribute))
		}
	}
	return targets
}

// uses reports whether a constraint on the whole claim, on the request or
// subrequest, or on the parent of a subrequest refers to attribute.
func (t constraintTargets) uses(attribute, request string) bool {
	if t[""][attribute] || t[request][attribute] {
		return true
	}
	parent, _, isSub := strings.Cut(request, "/")
	return isSub && t[parent][attribute]
}

// claimChecker holds what the checks of one device claim share.
type claimChecker struct {
	names       requestNames
	constraints constraintTargets
	// derivedCost sums the worst-case cost of all derived attribute
	// expressions of the claim.
	derivedCost uint64
}

// deviceClaim checks the devices a new claim or claim template asks for.
func deviceClaim(claim *resourceapi.DeviceClaim, path *field.Path) field.ErrorList {
	c := &claimChecker{names: requestNamesOf(claim), constraints: constraintTargetsOf(claim.Constraints)}
	errs := uniqueList(claim.Requests, resourceapi.DeviceRequestsMaxSize, path.Child("requests"), c.request,
		func(r resourceapi.DeviceRequest) string { return r.Name })
	errs = append(errs, boundedList(claim.Constraints, resourceapi.DeviceConstraintsMaxSize, path.Child("constraints"), c.constraint)...)
	errs = append(errs, boundedList(claim.Config, resourceapi.DeviceConfigMaxSize, path.Child("config"), c.config)...)
	if c.derivedCost > resourceapi.DeviceClaimDerivedAttributeCELMaxCost {
		errs = append(errs, field.Forbidden(path, "too complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit"))
	}
	return errs
}

func (c *claimChecker) request(request resourceapi.DeviceRequest, path *field.Path) field.ErrorList {
	errs := label(request.Name, path.Child("name"))
	hasExactly, hasFirstAvailable := request.Exactly != nil, len(request.FirstAvailable) > 0
	switch {
	case !hasExactly && !hasFirstAvailable:
		errs = append(errs, field.Required(path, "exactly one of `exactly` or `firstAvailable` is required"))
	case hasExactly && hasFirstAvailable:
		errs = append(errs, field.Invalid(path, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
	case hasExactly:
		path := path.Child("exactly")
		errs = append(errs, deviceClassName(request.Exactly.DeviceClassName, path.Child("deviceClassName"))...)
		errs = append(errs, c.selection(exactSelection(request.Exactly), request.Name, path)...)
	default:
		errs = append(errs, uniqueList(request.FirstAvailable, resourceapi.FirstAvailableDeviceRequestMaxSize, path.Child("firstAvailable"),
			func(sub resourceapi.DeviceSubRequest, path *field.Path) field.ErrorList {
				errs := label(sub.Name, path.Child("name"))
				// Unlike for exact requests, upstream declares the class name of
				// a subrequest too.
				errs = append(errs, deviceClassName(sub.DeviceClassName, path.Child("deviceClassName")).MarkCoveredByDeclarative()...)
				return append(errs, c.selection(subSelection(&sub), request.Name+"/"+sub.Name, path)...)
			},
			func(sub resourceapi.DeviceSubRequest) string { return sub.Name })...)
	}
	return errs
}

// selection is what an exact request and a subrequest both say about the
// devices of their class they want.
type selection struct {
	selectors   []resourceapi.DeviceSelector
	derived     []resourceapi.DeviceDerivedAttribute
	mode        resourceapi.DeviceAllocationMode
	count       int64
	tolerations []resourceapi.DeviceToleration
}

func exactSelection(r *resourceapi.ExactDeviceRequest) selection {
	return selection{r.Selectors, r.DerivedAttributes, r.AllocationMode, r.Count, r.Tolerations}
}

func subSelection(r *resourceapi.DeviceSubRequest) selection {
	return selection{r.Selectors, r.DerivedAttributes, r.AllocationMode, r.Count, r.Tolerations}
}

// selection checks the devices one request or subrequest (target, as a
// constraint names it) wants.
func (c *claimChecker) selection(s selection, target string, path *field.Path) field.ErrorList {
	errs := selectors(s.selectors, false, path.Child("selectors"))
	errs = append(errs, c.derivedAttributes(s.derived, target, path.Child("derivedAttributes"))...)
	errs = append(errs, allocationMode(s.mode, s.count, path)...)
	return append(errs, eachItem(s.tolerations, path.Child("tolerations"), toleration)...)
}

// allocationModes are the modes upstream lists when it rejects one.
var allocationModes = []resourceapi.DeviceAllocationMode{resourceapi.DeviceAllocationModeAll, resourceapi.DeviceAllocationModeExactCount}

func allocationMode(mode resourceapi.DeviceAllocationMode, count int64, path *field.Path) field.ErrorList {
	countPath := path.Child("count")
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		if count != 0 {
			return field.ErrorList{field.Invalid(countPath, count, fmt.Sprintf("must not be specified when allocationMode is '%s'", mode))}
		}
	case resourceapi.DeviceAllocationModeExactCount:
		if count <= 0 {
			return field.ErrorList{field.Invalid(countPath, count, "must be greater than zero")}
		}
	default:
		return field.ErrorList{field.NotSupported(path.Child("allocationMode"), mode, allocationModes).MarkCoveredByDeclarative()}
	}
	return nil
}

// selectors checks the CEL selectors of a request or class; stored ones
// are not compiled again.
func selectors(list []resourceapi.DeviceSelector, stored bool, path *field.Path) field.ErrorList {
	return boundedList(list, resourceapi.DeviceSelectorsMaxSize, path, func(s resourceapi.DeviceSelector, path *field.Path) field.ErrorList {
		switch {
		case s.CEL == nil:
			return field.ErrorList{field.Required(path.Child("cel"), "")}
		case stored:
			return nil
		}
		return selectorExpression(s.CEL.Expression, path.Child("cel", "expression"))
	})
}

// derivedAttributes checks the attributes a request computes for its
// devices. Their number, and that names and expressions are set and the
// names fully qualified, are declarative rules.
func (c *claimChecker) derivedAttributes(attributes []resourceapi.DeviceDerivedAttribute, target string, path *field.Path) field.ErrorList {
	return uniqueList(attributes, -1, path,
		func(a resourceapi.DeviceDerivedAttribute, path *field.Path) field.ErrorList {
			return c.derivedAttribute(a, target, path)
		},
		func(a resourceapi.DeviceDerivedAttribute) string { return string(a.Name) })
}

// derivedAttribute checks that a constraint on target uses the attribute,
// and its expression.
func (c *claimChecker) derivedAttribute(a resourceapi.DeviceDerivedAttribute, target string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Name != "" && !c.constraints.uses(string(a.Name), target) {
		errs = append(errs, field.Invalid(path.Child("name"), a.Name, "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting this request"))
	}
	if a.Expression != "" {
		errs = append(errs, derivedAttributeExpression(a.Expression, &c.derivedCost, path.Child("expression"))...)
	}
	return errs
}

func (c *claimChecker) requestRef(ref string, path *field.Path) field.ErrorList {
	return requestRef(ref, c.names, path)
}

// constraint checks one constraint. With DRAConsumableCapacity on (the
// default) it may match or keep distinct an attribute; like upstream, the
// message for neither says "multiple".
func (c *claimChecker) constraint(constraint resourceapi.DeviceConstraint, path *field.Path) field.ErrorList {
	errs := uniqueList(constraint.Requests, resourceapi.DeviceRequestsMaxSize, path.Child("requests"), c.requestRef, itself)
	switch {
	case constraint.MatchAttribute != nil:
		errs = append(errs, fullyQualifiedName(*constraint.MatchAttribute, path.Child("matchAttribute")).MarkCoveredByDeclarative()...)
	case constraint.DistinctAttribute != nil:
		errs = append(errs, fullyQualifiedName(*constraint.DistinctAttribute, path.Child("distinctAttribute")).MarkCoveredByDeclarative()...)
	default:
		errs = append(errs, field.Required(path, `exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set`))
	}
	return errs
}

func (c *claimChecker) config(config resourceapi.DeviceClaimConfiguration, path *field.Path) field.ErrorList {
	errs := uniqueList(config.Requests, resourceapi.DeviceRequestsMaxSize, path.Child("requests"), c.requestRef, itself)
	return append(errs, deviceConfiguration(config.DeviceConfiguration, false, path)...)
}

// templateSpec checks the claim a template stamps out.
func templateSpec(spec *resourceapi.ResourceClaimTemplateSpec, path *field.Path) field.ErrorList {
	errs := templateMetadata(&spec.ObjectMeta, path.Child("metadata"))
	return append(errs, deviceClaim(&spec.Spec.Devices, path.Child("spec", "devices"))...)
}

// templateMetadata checks the metadata a claim template gives its claims:
// valid labels and annotations, and nothing else.
func templateMetadata(meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(meta.Annotations, path.Child("annotations"))
	errs = append(errs, metav1validation.ValidateLabels(meta.Labels, path.Child("labels"))...)
	value := reflect.ValueOf(*meta)
	for i := range value.NumField() {
		name := value.Type().Field(i).Name
		if name == "Labels" || name == "Annotations" || value.Field(i).IsZero() {
			continue
		}
		first, size := utf8.DecodeRuneInString(name)
		errs = append(errs, field.Forbidden(path.Child(string(unicode.ToLower(first))+name[size:]), "cannot be set"))
	}
	return errs
}
