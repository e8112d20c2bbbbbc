package runtimeclass

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// dns1123Label is the message of a handler that is no DNS-1123 label.
const dns1123Label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"

func valid() *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sandboxed"},
		Handler:    "runsc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("1Mi"),
		}},
		Scheduling: &nodev1.Scheduling{
			NodeSelector: map[string]string{"sandbox.example.com/runtime": "gvisor"},
			Tolerations: []corev1.Toleration{
				{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			},
		},
	}
}

func TestValidate(t *testing.T) {
	type rc = *nodev1.RuntimeClass
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[rc]{
		{Name: "valid", Change: func(rc) {}},
		{Name: "handler only", Change: func(r rc) { r.Overhead, r.Scheduling = nil, nil }},
		{Name: "empty overhead and scheduling", Change: func(r rc) {
			r.Overhead, r.Scheduling = &nodev1.Overhead{}, &nodev1.Scheduling{}
		}},
		{Name: "no handler", Change: func(r rc) { r.Handler = "" }, Want: []string{
			"handler: Required value",
		}},
		{Name: "handler not a label", Change: func(r rc) { r.Handler = "Runc_V2" }, Want: []string{
			`handler: Invalid value: "Runc_V2": ` + dns1123Label,
		}},
		{Name: "handler with dots", Change: func(r rc) { r.Handler = "runc.v2" }, Want: []string{
			`handler: Invalid value: "runc.v2": must not contain dots`,
		}},
		// The declarative check's words replace the handwritten one's
		// ("characters").
		{Name: "handler too long", Change: func(r rc) { r.Handler = strings.Repeat("a", 64) }, Want: []string{
			`handler: Invalid value: "` + strings.Repeat("a", 64) + `": must be no more than 63 bytes`,
		}},
		{Name: "negative overhead", Change: func(r rc) {
			r.Overhead.PodFixed[corev1.ResourceCPU] = resource.MustParse("-1")
			r.Overhead.PodFixed[corev1.ResourceMemory] = resource.MustParse("-10Mi")
		}, Want: []string{
			`overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0`,
			`overhead.limits[memory]: Invalid value: "-10Mi": must be greater than or equal to 0`,
		}},
		{Name: "overhead resource names", Change: func(r rc) {
			r.Overhead.PodFixed = corev1.ResourceList{
				corev1.ResourceCPU:         resource.MustParse("1"),
				"pods":                     resource.MustParse("1"),
				"gpu":                      resource.MustParse("1"),
				"example.com/gpu":          resource.MustParse("500m"),
				"kubernetes.io/Bad Name":   resource.MustParse("1"),
				"requests.example.com/gpu": resource.MustParse("1"),
			}
		}, Want: []string{
			`overhead.limits[example.com/gpu]: Invalid value: "500m": must be an integer`,
			`overhead.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified`,
			`overhead.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers`,
			`overhead.limits[kubernetes.io/Bad Name]: Invalid value: "kubernetes.io/Bad Name": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`overhead.limits[pods]: Invalid value: "pods": must be a standard resource for containers`,
			`overhead.limits[requests.example.com/gpu]: Invalid value: "requests.example.com/gpu": doesn't follow extended resource name standard`,
		}},
		{Name: "huge pages without cpu or memory", Change: func(r rc) {
			r.Overhead.PodFixed = corev1.ResourceList{"hugepages-2Mi": resource.MustParse("3Mi")}
		}, Want: []string{
			`overhead.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`,
			"overhead: Forbidden: HugePages require cpu or memory",
		}},
		// One bad entry per case: a map's errors come in no set order.
		{Name: "node selector key", Change: func(r rc) {
			r.Scheduling.NodeSelector = map[string]string{"bad key": "v"}
		}, Want: []string{
			`scheduling.nodeSelector: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{Name: "node selector value", Change: func(r rc) {
			r.Scheduling.NodeSelector = map[string]string{"zone": "not valid"}
		}, Want: []string{
			`scheduling.nodeSelector: Invalid value: "not valid": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		}},
		{Name: "tolerations", Change: func(r rc) {
			r.Scheduling.Tolerations = []corev1.Toleration{
				{Operator: corev1.TolerationOpEqual, Value: "x"},
				{Key: "a", Operator: corev1.TolerationOpExists, Value: "b"},
				{Key: "a", Operator: "Near"},
				{Key: "a", Operator: corev1.TolerationOpLt, Value: "5"},
				{Key: "a", Effect: "NoRun"},
				{Key: "a", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)},
				{Key: "bad key", Operator: corev1.TolerationOpExists},
			}
		}, Want: []string{
			`scheduling.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when ` + "`key`" + ` is empty, which means "match all values and all keys"`,
			`scheduling.tolerations[1].operator: Invalid value: "b": value must be empty when ` + "`operator`" + ` is 'Exists'`,
			`scheduling.tolerations[2].operator: Unsupported value: "Near": supported values: "Equal", "Exists"`,
			`scheduling.tolerations[3].operator: Unsupported value: "Lt": supported values: "Equal", "Exists", "Lt", "Gt"`,
			`scheduling.tolerations[4].effect: Unsupported value: "NoRun": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
			`scheduling.tolerations[5].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`,
			`scheduling.tolerations[6].key: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{Name: "duplicate tolerations", Change: func(r rc) {
			r.Scheduling.Tolerations = append(r.Scheduling.Tolerations,
				// Another tolerationSeconds does not make it another toleration.
				corev1.Toleration{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
				corev1.Toleration{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				// An empty operator is not Equal for the comparison.
				corev1.Toleration{Key: "k", Value: "v"},
				corev1.Toleration{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v"},
			)
		}, Want: []string{
			`scheduling.tolerations[2]: Duplicate value: {"Key":"sandbox","Operator":"Exists","Value":"","Effect":"NoExecute","TolerationSeconds":60}`,
			`scheduling.tolerations[3]: Duplicate value: {"Key":"sandbox","Operator":"Exists","Value":"","Effect":"NoSchedule","TolerationSeconds":null}`,
		}},
		{Name: "handler errors come last", Change: func(r rc) {
			r.Handler = ""
			r.Overhead.PodFixed[corev1.ResourceCPU] = resource.MustParse("-1")
			r.Scheduling.NodeSelector = map[string]string{"zone": "not valid"}
		}, Want: []string{
			`overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0`,
			`scheduling.nodeSelector: Invalid value: "not valid": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			"handler: Required value",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type rc = *nodev1.RuntimeClass
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[rc]{
		{Name: "unchanged", Change: func(rc) {}},
		{Name: "overhead and scheduling change", Change: func(r rc) {
			r.Overhead = nil
			r.Scheduling.NodeSelector = map[string]string{"sandbox": "true"}
		}},
		{Name: "handler changed", Change: func(r rc) { r.Handler = "kata" }, Want: []string{
			"handler: Invalid value: null: field is immutable",
		}},
		{Name: "handler changed to an invalid one", Change: func(r rc) { r.Handler = "Kata" }, Want: []string{
			`handler: Invalid value: "Kata": ` + dns1123Label,
			"handler: Invalid value: null: field is immutable",
		}},
		// The declarative check stops at immutability, so the
		// handwritten message stays.
		{Name: "handler changed to a long one", Change: func(r rc) { r.Handler = strings.Repeat("a", 64) }, Want: []string{
			`handler: Invalid value: "` + strings.Repeat("a", 64) + `": must be no more than 63 characters`,
			"handler: Invalid value: null: field is immutable",
		}},
		{Name: "handler removed", Change: func(r rc) { r.Handler = "" }, Want: []string{
			"handler: Invalid value: null: field is immutable",
			"handler: Required value",
		}},
		{Name: "new object still validated", Change: func(r rc) {
			r.Overhead.PodFixed[corev1.ResourceMemory] = resource.MustParse("-1Mi")
		}, Want: []string{
			`overhead.limits[memory]: Invalid value: "-1Mi": must be greater than or equal to 0`,
		}},
	})
}

func TestColumns(t *testing.T) {
	registrytest.ExpectRow(t, Resource().Columns, valid(), []string{"Name", "Handler", "Age"},
		[]interface{}{"sandboxed", "runsc", "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "runtimeclasses" || r.Singular != "runtimeclass" || r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 0 || r.Kind.String() != "node.k8s.io/v1, Kind=RuntimeClass" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
