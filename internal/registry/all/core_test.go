package all

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/replicationcontroller"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

func TestCoreDiscovery(t *testing.T) {
	cfg, err := allocator.ParseConfig("10.96.0.0/12", "30000-32767")
	if err != nil {
		t.Fatal(err)
	}
	set, err := registry.NewSet(core(Deps{Services: allocator.NewServices(nil, cfg, nil)})...)
	if err != nil {
		t.Fatal(err)
	}
	// resource: short names, categories, namespaced, status, generation
	want := map[string]string{
		"configmaps":             "cm||true|false|false",
		"endpoints":              "ep||true|false|false",
		"events":                 "ev||true|false|false",
		"namespaces":             "ns||false|true|false",
		"nodes":                  "no||false|true|false",
		"persistentvolumes":      "pv||false|true|false",
		"persistentvolumeclaims": "pvc||true|true|false",
		"pods":                   "po|all|true|true|true",
		"podtemplates":           "||true|false|true",
		"replicationcontrollers": "rc|all|true|true|true",
		"resourcequotas":         "quota||true|true|false",
		"secrets":                "||true|false|false",
		"services":               "svc|all|true|true|false",
		"serviceaccounts":        "sa||true|false|false",
	}
	for _, r := range set.All() {
		got := strings.Join([]string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Namespaced), boolString(r.Status), boolString(r.Generation)}, "|")
		if w, ok := want[r.Resource]; !ok {
			t.Errorf("unexpected resource %s", r.Resource)
		} else if got != w {
			t.Errorf("%s: discovery %s, want %s", r.Resource, got, w)
		}
		delete(want, r.Resource)
		if scalable := r.Resource == "replicationcontrollers"; (r.Scale != nil) != scalable {
			t.Errorf("%s: scale subresource %v, want %v", r.Resource, r.Scale != nil, scalable)
		}
		if r.Kind.Group != "" || r.Kind.Version != "v1" || !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: bad kind %s", r.Resource, r.Kind)
		}
		hasName := false
		for _, c := range r.Columns {
			hasName = hasName || c.Format == "name"
		}
		if !hasName {
			t.Errorf("%s: no name column", r.Resource)
		}
	}
	for r := range want {
		t.Errorf("missing resource %s", r)
	}
}

// checkRegistered checks the resources against want, keyed by group,
// version and resource: short names, categories, namespaced, status,
// generation and column names joined by "|", then what each of more
// says of the resource; and that the scheme knows each kind.
func checkRegistered(t *testing.T, resources []*registry.Resource, want map[string]string, more ...func(*registry.Resource) string) {
	t.Helper()
	set, err := registry.NewSet(resources...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set.All() {
		gvr := r.GroupVersionResource().String()
		var columns []string
		for _, c := range r.Columns {
			columns = append(columns, c.Name)
		}
		fields := []string{strings.Join(r.ShortNames, ","), strings.Join(r.Categories, ","),
			boolString(r.Namespaced), boolString(r.Status), boolString(r.Generation), strings.Join(columns, ",")}
		for _, m := range more {
			fields = append(fields, m(r))
		}
		if w, ok := want[gvr]; !ok || strings.Join(fields, "|") != w {
			t.Errorf("%s: %s, want %q", gvr, strings.Join(fields, "|"), w)
		}
		delete(want, gvr)
		if !registry.Scheme.Recognizes(r.Kind) {
			t.Errorf("%s: the scheme does not know %s", gvr, r.Kind)
		}
	}
	for gvr := range want {
		t.Errorf("missing resource %s", gvr)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestPodTemplateHooks(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
	workload.DefaultTemplate(tmpl)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways || tmpl.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Fatalf("template not defaulted: %+v", tmpl.Spec)
	}
	if tmpl.Spec.EnableServiceLinks != nil {
		t.Error("enableServiceLinks is a pod default, not a template one")
	}
	tmpl.Spec.Containers[0].Image = ""
	errs := workload.ValidatePodTemplate(tmpl, field.NewPath("spec", "template"))
	if len(errs) != 1 || errs[0].Error() != "spec.template.spec.containers[0].image: Required value" {
		t.Fatalf("got %v", errs)
	}
}

func TestReplicationControllerTemplateHooks(t *testing.T) {
	rc := &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
	}}}
	s := replicationcontroller.Resource().Strategy
	s.Default(rc)
	if rc.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Fatalf("template not defaulted: %+v", rc.Spec.Template.Spec)
	}
	errs := s.Validate(rc)
	if len(errs) != 1 || errs[0].Error() != "spec.template.spec.containers[0].image: Required value" {
		t.Fatalf("got %v", errs)
	}
}
