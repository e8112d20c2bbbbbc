package event

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConvertV1(t *testing.T) {
	now := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)
	v1 := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		EventTime:                metav1.NewMicroTime(now),
		Series:                   &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(now.Add(time.Minute))},
		ReportingController:      "svcnet/kubelet",
		ReportingInstance:        "node-1",
		Action:                   "Pulling",
		Reason:                   "Pulled",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "node-1"},
		Note:                     "pulled",
		Type:                     "Normal",
		DeprecatedSource:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		DeprecatedFirstTimestamp: metav1.NewTime(now), DeprecatedLastTimestamp: metav1.NewTime(now),
		DeprecatedCount: 2,
	}
	obj, err := ToCore(v1)
	if err != nil {
		t.Fatal(err)
	}
	c := obj.(*corev1.Event)
	if c.APIVersion != "v1" || c.Message != "pulled" || c.InvolvedObject.Name != "web" || c.Related.Name != "node-1" ||
		c.Source.Component != "kubelet" || c.Count != 2 || !c.FirstTimestamp.Equal(&v1.DeprecatedFirstTimestamp) ||
		c.Series.Count != 3 || c.Action != "Pulling" || c.ReportingInstance != "node-1" {
		t.Errorf("ToCore = %+v", c)
	}
	back, err := ToV1(c)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(back, v1) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, v1)
	}
}

func TestValidateV1(t *testing.T) {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "svcnet/kubelet",
		ReportingInstance:   "node-1",
		Action:              "Pulling",
		Reason:              "Pulled",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default"},
		Type:                "Normal",
	}
	if errs := (strategyV1{}).Validate(ev); len(errs) != 0 {
		t.Fatalf("valid event: %v", errs)
	}
	bad := ev.DeepCopy()
	bad.EventTime = metav1.MicroTime{}
	bad.Note = strings.Repeat("x", 1025)
	bad.DeprecatedCount = 1
	errs := (strategyV1{}).Validate(bad)
	got := errs.ToAggregate().Error()
	for _, want := range []string{"eventTime: Required value", "count: Invalid value: \"\": needs to be unset"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q lack %q", got, want)
		}
	}
	upd := ev.DeepCopy()
	upd.Note = "changed"
	if errs := (strategyV1{}).ValidateUpdate(upd, ev); len(errs) != 1 || errs[0].Field != "message" {
		t.Errorf("update errors = %v", errs)
	}
	long := ev.DeepCopy()
	long.Note = strings.Repeat("x", 1025)
	if errs := (strategyV1{}).Validate(long); len(errs) != 1 || errs[0].Field != "message" {
		t.Errorf("long note errors = %v", errs)
	}
}
