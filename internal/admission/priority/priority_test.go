package priority

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/admission"
)

func class(name string, value int32, globalDefault bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value,
		GlobalDefault: globalDefault, PreemptionPolicy: &policy}
}

var (
	nodeCritical = class("system-node-critical", 2000001000, false, corev1.PreemptLowerPriority)
	high         = class("high", 1000, false, corev1.PreemptLowerPriority)
	gentle       = class("gentle", 500, false, corev1.PreemptNever)
	defaultLow   = class("default-low", 10, true, corev1.PreemptNever)
	defaultLower = class("default-lower", 5, true, corev1.PreemptLowerPriority)
)

// newPlugin is the plugin over a cache of cached and an API holding
// stored too.
func newPlugin(t *testing.T, cached []*schedulingv1.PriorityClass, stored ...*schedulingv1.PriorityClass) *Plugin {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objects []runtime.Object
	for _, c := range cached {
		if err := indexer.Add(c); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, c)
	}
	for _, c := range stored {
		objects = append(objects, c)
	}
	return New(schedulinglisters.NewPriorityClassLister(indexer), fake.NewClientset(objects...))
}

func podCreate(pod *corev1.Pod) *admission.Attributes {
	return &admission.Attributes{Operation: admission.Create, Resource: podResource, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
		Namespace: pod.Namespace, Name: pod.Name, Object: pod}
}

func newPod(mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestAdmitPod(t *testing.T) {
	for _, tt := range []struct {
		name      string
		classes   []*schedulingv1.PriorityClass
		stored    []*schedulingv1.PriorityClass // in the API, not yet in the cache
		pod       func(*corev1.Pod)
		wantClass string
		want      int32
		policy    corev1.PreemptionPolicy
		err       string
	}{
		{name: "no class, no default", classes: []*schedulingv1.PriorityClass{high},
			want: 0, policy: corev1.PreemptLowerPriority},
		{name: "named class", classes: []*schedulingv1.PriorityClass{high, gentle, defaultLow},
			pod: func(p *corev1.Pod) { p.Spec.PriorityClassName = "gentle" }, wantClass: "gentle", want: 500, policy: corev1.PreemptNever},
		{name: "system class", classes: []*schedulingv1.PriorityClass{nodeCritical},
			pod:       func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" },
			wantClass: "system-node-critical", want: 2000001000, policy: corev1.PreemptLowerPriority},
		{name: "class not cached yet", stored: []*schedulingv1.PriorityClass{high},
			pod: func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" }, wantClass: "high", want: 1000, policy: corev1.PreemptLowerPriority},
		{name: "global default", classes: []*schedulingv1.PriorityClass{high, defaultLow},
			wantClass: "default-low", want: 10, policy: corev1.PreemptNever},
		{name: "the lowest of two defaults", classes: []*schedulingv1.PriorityClass{defaultLow, defaultLower},
			wantClass: "default-lower", want: 5, policy: corev1.PreemptLowerPriority},
		{name: "matching values of the pod's own", classes: []*schedulingv1.PriorityClass{high},
			pod: func(p *corev1.Pod) {
				p.Spec.PriorityClassName = "high"
				p.Spec.Priority = ptr.To[int32](1000)
				p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
			}, wantClass: "high", want: 1000, policy: corev1.PreemptLowerPriority},
		{name: "unknown class", classes: []*schedulingv1.PriorityClass{high, defaultLow},
			pod: func(p *corev1.Pod) { p.Spec.PriorityClassName = "urgent" },
			err: `pods "web" is forbidden: no PriorityClass with name urgent was found`},
		{name: "a priority of its own", classes: []*schedulingv1.PriorityClass{high},
			pod: func(p *corev1.Pod) {
				p.Spec.PriorityClassName = "high"
				p.Spec.Priority = ptr.To[int32](7)
			},
			err: `pods "web" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`},
		{name: "a priority without a class", pod: func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](100) },
			err: `pods "web" is forbidden: the integer value of priority (100) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name`},
		{name: "a preemption policy of its own", classes: []*schedulingv1.PriorityClass{defaultLow},
			pod: func(p *corev1.Pod) { p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority) },
			err: `pods "web" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name`},
		{name: "generated name", pod: func(p *corev1.Pod) {
			p.Name, p.GenerateName = "", "web-"
			p.Spec.PriorityClassName = "urgent"
		}, err: `pods "web-" is forbidden: no PriorityClass with name urgent was found`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, tt.classes, tt.stored...)
			pod := newPod(tt.pod)
			err := p.Admit(context.Background(), podCreate(pod))
			if tt.err != "" {
				if !apierrors.IsForbidden(err) || err.Error() != tt.err {
					t.Fatalf("error %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Spec.PriorityClassName != tt.wantClass || pod.Spec.Priority == nil || *pod.Spec.Priority != tt.want ||
				pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != tt.policy {
				t.Errorf("class %q, priority %v, policy %v; want %q, %d, %s", pod.Spec.PriorityClassName,
					ptr.Deref(pod.Spec.Priority, -1), ptr.Deref(pod.Spec.PreemptionPolicy, "<nil>"), tt.wantClass, tt.want, tt.policy)
			}
		})
	}
}

// TestAdmitPodPolicyIsOwn: the pod's policy is not the cached class's.
func TestAdmitPodPolicyIsOwn(t *testing.T) {
	c := class("gentle", 500, false, corev1.PreemptNever)
	p := newPlugin(t, []*schedulingv1.PriorityClass{c})
	pod := newPod(func(p *corev1.Pod) { p.Spec.PriorityClassName = "gentle" })
	if err := p.Admit(context.Background(), podCreate(pod)); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.PreemptionPolicy == c.PreemptionPolicy {
		t.Error("the pod shares the cached class's preemption policy")
	}
}

func TestAdmitPodUpdate(t *testing.T) {
	p := newPlugin(t, []*schedulingv1.PriorityClass{defaultLow})
	old := newPod(func(p *corev1.Pod) {
		p.Spec.PriorityClassName = "high"
		p.Spec.Priority = ptr.To[int32](1000)
		p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
	})
	pod := newPod(func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" })
	a := &admission.Attributes{Operation: admission.Update, Resource: podResource, Namespace: "default", Name: "web",
		Object: pod, OldObject: old}
	if err := p.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(pod.Spec.Priority, -1) != 1000 || ptr.Deref(pod.Spec.PreemptionPolicy, "") != corev1.PreemptLowerPriority {
		t.Errorf("updated pod priority %v, policy %v; want the old ones", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
	}
	// A priority the update sets stays, for validation to refuse.
	pod = newPod(func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](3) })
	a.Object = pod
	if err := p.Admit(context.Background(), a); err != nil || *pod.Spec.Priority != 3 {
		t.Errorf("priority %d, error %v; want 3 and none", *pod.Spec.Priority, err)
	}
}

func TestAdmitSkips(t *testing.T) {
	p := newPlugin(t, nil)
	for _, a := range []*admission.Attributes{
		// A pod's subresource, and other kinds, are not the plugin's.
		{Operation: admission.Create, Resource: podResource, Subresource: "binding", Object: &corev1.Binding{}},
		{Operation: admission.Create, Resource: schedulingv1.Resource("workloads"), Object: &corev1.Pod{}},
		{Operation: admission.Delete, Resource: podResource, OldObject: newPod(nil)},
	} {
		if err := p.Admit(context.Background(), a); err != nil {
			t.Errorf("%s %s/%s: %v", a.Operation, a.Resource, a.Subresource, err)
		}
	}
	pod := newPod(nil)
	if err := p.Admit(context.Background(), &admission.Attributes{Operation: admission.Create,
		Resource: podResource, Subresource: "ephemeralcontainers", Object: pod}); err != nil || pod.Spec.Priority != nil {
		t.Errorf("a subresource write: priority %v, error %v", pod.Spec.Priority, err)
	}
}

func TestValidateGlobalDefault(t *testing.T) {
	pcCreate := func(c *schedulingv1.PriorityClass, op admission.Operation) *admission.Attributes {
		return &admission.Attributes{Operation: op, Resource: priorityClassResource, Name: c.Name, Object: c}
	}
	for _, tt := range []struct {
		name    string
		classes []*schedulingv1.PriorityClass
		class   *schedulingv1.PriorityClass
		op      admission.Operation
		err     string
	}{
		{name: "the first default", classes: []*schedulingv1.PriorityClass{high}, class: defaultLow, op: admission.Create},
		{name: "not a default", classes: []*schedulingv1.PriorityClass{defaultLow}, class: gentle, op: admission.Create},
		{name: "a second default", classes: []*schedulingv1.PriorityClass{high, defaultLow}, class: defaultLower, op: admission.Create,
			err: `priorityclasses.scheduling.k8s.io "default-lower" is forbidden: PriorityClass default-low is already marked as default. Only one default can exist`},
		// Creating the default again (AlreadyExists follows) is refused too.
		{name: "the default created again", classes: []*schedulingv1.PriorityClass{defaultLow}, class: defaultLow, op: admission.Create,
			err: `priorityclasses.scheduling.k8s.io "default-low" is forbidden: PriorityClass default-low is already marked as default. Only one default can exist`},
		{name: "the default updated", classes: []*schedulingv1.PriorityClass{defaultLow}, class: defaultLow, op: admission.Update},
		{name: "another made the default", classes: []*schedulingv1.PriorityClass{defaultLow, high},
			class: class("high", 1000, true, corev1.PreemptLowerPriority), op: admission.Update,
			err: `priorityclasses.scheduling.k8s.io "high" is forbidden: PriorityClass default-low is already marked as default. Only one default can exist`},
		{name: "a default removed", classes: []*schedulingv1.PriorityClass{defaultLow}, class: class("default-low", 10, false, corev1.PreemptNever), op: admission.Update},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := newPlugin(t, tt.classes).Validate(context.Background(), pcCreate(tt.class, tt.op))
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.err != "" && (!apierrors.IsForbidden(err) || err.Error() != tt.err):
				t.Errorf("error %v, want %s", err, tt.err)
			}
		})
	}
	// Pods are not checked by Validate.
	if err := newPlugin(t, nil).Validate(context.Background(), podCreate(newPod(func(p *corev1.Pod) {
		p.Spec.PriorityClassName = "urgent"
	}))); err != nil {
		t.Errorf("Validate of a pod: %v", err)
	}
}
