package dra

import (
	"math"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func valuesPolicy(def *resource.Quantity, values ...string) *resourceapi.CapacityRequestPolicy {
	p := &resourceapi.CapacityRequestPolicy{Default: def}
	for _, v := range values {
		p.ValidValues = append(p.ValidValues, resource.MustParse(v))
	}
	return p
}

func rangePolicy(def, min, max, step *resource.Quantity) *resourceapi.CapacityRequestPolicy {
	return &resourceapi.CapacityRequestPolicy{Default: def, ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: min, Max: max, Step: step}}
}

func TestRequestPolicy(t *testing.T) {
	maxInt64 := resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	maxInt64Plus1 := maxInt64.DeepCopy()
	maxInt64Plus1.Add(*resource.NewQuantity(1, resource.DecimalSI))
	const (
		policy      = "c.requestPolicy"
		validValues = policy + ".validValues"
		validRange  = policy + ".validRange"
	)
	for name, tc := range map[string]struct {
		capacity string
		policy   *resourceapi.CapacityRequestPolicy
		want     []want
	}{
		"no policy":                {capacity: "1Gi"},
		"policy without default":   {capacity: "1Gi", policy: &resourceapi.CapacityRequestPolicy{}},
		"default without policy":   {capacity: "10Gi", policy: &resourceapi.CapacityRequestPolicy{Default: quantity("1Gi")}},
		"simple range":             {capacity: "10Gi", policy: rangePolicy(quantity("1Gi"), quantity("1Gi"), nil, nil)},
		"range with max and step":  {capacity: "10Gi", policy: rangePolicy(quantity("1Gi"), quantity("1Gi"), quantity("10Gi"), quantity("1Gi"))},
		"options":                  {capacity: "10Gi", policy: valuesPolicy(quantity("1Gi"), "1Gi", "10Gi")},
		"largest integer step":     {capacity: maxInt64.String(), policy: rangePolicy(quantity("0"), quantity("0"), nil, maxInt64)},
		"negative bounds, no step": {capacity: "10Gi", policy: rangePolicy(quantity("-1"), quantity("-1"), nil, nil)},
		// With DRAFractionalCapacityRange off, fractions count as whole units,
		// rounded up: none of these is off its step or beyond int64.
		"fractional step":                          {capacity: "1", policy: rangePolicy(quantity("200m"), quantity("200m"), quantity("1"), quantity("100m"))},
		"fractional default off an integer step":   {capacity: "10Gi", policy: rangePolicy(quantity("100m"), quantity("0"), nil, quantity("1"))},
		"fractional default off a fractional step": {capacity: "1", policy: rangePolicy(quantity("250m"), quantity("200m"), quantity("1"), quantity("100m"))},
		"fractional range beyond milli units":      {capacity: "100P", policy: rangePolicy(quantity("20P"), quantity("10P"), nil, quantity("100m"))},
		"finer than milli units":                   {capacity: "1", policy: rangePolicy(quantity("20u"), quantity("10u"), nil, nil)},
		"fractional options": {
			capacity: "10Gi", policy: valuesPolicy(quantity("100m"), "100m", "200m", "1"),
			want: []want{duplicate(validValues + "[1]"), duplicate(validValues + "[2]")},
		},
		"options without default": {
			capacity: "1Gi", policy: valuesPolicy(nil, "1Gi"),
			want: []want{required(policy+".default", "required when validValues is defined")},
		},
		"range without default": {
			capacity: "1Gi", policy: rangePolicy(nil, quantity("1Gi"), nil, nil),
			want: []want{required(policy+".default", "required when validRange is defined")},
		},
		"range without min": {
			capacity: "1Gi", policy: rangePolicy(quantity("1Gi"), nil, nil, nil),
			want: []want{required(validRange+".min", "required when validRange is defined")},
		},
		"options and range": {
			capacity: "10Gi", policy: func() *resourceapi.CapacityRequestPolicy {
				p := valuesPolicy(quantity("1Gi"), "1Gi")
				p.ValidRange = &resourceapi.CapacityRequestPolicyRange{Min: quantity("1Gi")}
				return p
			}(),
			want: []want{forbidden(policy, `exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)},
		},
		"option over capacity": {
			capacity: "10Gi", policy: valuesPolicy(quantity("1Gi"), "20Gi"),
			want: []want{
				invalid(validValues+"[0]", "option is larger than capacity value: 10Gi"),
				invalid(validValues, "default value is not valid according to the requestPolicy"),
			},
		},
		"duplicate options": {
			capacity: "10Gi", policy: valuesPolicy(quantity("1Ki"), "1Ki", "1024", "1"),
			want: []want{
				duplicate(validValues + "[1]"),
				invalid(validValues+"[2]", "values must be sorted in ascending order"),
			},
		},
		"too many options": {
			capacity: "10Gi", policy: valuesPolicy(quantity("1"), "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"),
			want: []want{
				tooMany(validValues),
				invalid(validValues, "default value is not valid"),
			},
		},
		"range out of order": {
			capacity: "10Gi", policy: rangePolicy(quantity("2Gi"), quantity("20Gi"), quantity("1Gi"), nil),
			want: []want{
				invalid(validRange+".min", "min is larger than capacity value: 10Gi"),
				invalid(validRange+".default", "default is less than min: 20Gi"),
				invalid(validRange+".max", "min is larger than max: 1Gi"),
				invalid(validRange+".default", "default is more than max: 1Gi"),
			},
		},
		"max over capacity": {
			capacity: "10Gi", policy: rangePolicy(quantity("1Gi"), quantity("1Gi"), quantity("20Gi"), nil),
			want: []want{invalid(validRange+".max", "max is larger than capacity value: 10Gi")},
		},
		"default and max off step": {
			capacity: "10Gi", policy: rangePolicy(quantity("2Gi"), quantity("1Gi"), quantity("10Gi"), quantity("2Gi")),
			want: []want{
				invalid(validRange+".step", "value is not a multiple of a given step (2Gi) from (1Gi)"),
				invalid(validRange+".step", "value is not a multiple of a given step (2Gi) from (1Gi)"),
			},
		},
		"step of 2^64": {
			capacity: "18446744073709551616", policy: rangePolicy(quantity("0"), quantity("0"), nil, quantity("18446744073709551616")),
			want: []want{invalid(validRange+".step", "must not be larger than 9223372036854775807")},
		},
		"step past int64": {
			capacity: maxInt64Plus1.String(), policy: rangePolicy(quantity("0"), quantity("0"), nil, &maxInt64Plus1),
			want: []want{invalid(validRange+".step", "must not be larger than 9223372036854775807")},
		},
		"negative min with step": {
			capacity: "10Gi", policy: rangePolicy(quantity("0"), quantity("-1"), nil, quantity("1")),
			want: []want{invalid(validRange+".min", "must be greater than or equal to 0")},
		},
		"step over capacity": {
			capacity: "10Gi", policy: rangePolicy(quantity("1Gi"), quantity("1Gi"), nil, quantity("10Gi")),
			want: []want{invalid(validRange+".step", "one step 11Gi is larger than capacity value: 10Gi")},
		},
		"negative step": {
			capacity: "1Gi", policy: rangePolicy(quantity("10Mi"), quantity("1Mi"), quantity("100Mi"), quantity("-1Mi")),
			want: []want{invalid(validRange+".step", "must be greater than zero")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			device := resourceapi.Device{AllowMultipleAllocations: ptr.To(true)}
			capacity := resourceapi.DeviceCapacity{Value: resource.MustParse(tc.capacity), RequestPolicy: tc.policy}
			assertErrors(t, capacityCheck(device)(capacity, field.NewPath("c")), tc.want)
		})
	}
}
