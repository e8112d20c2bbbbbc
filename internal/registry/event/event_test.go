package event

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestColumns(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	legacy := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17a", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "default", FieldPath: "spec.containers{web}"},
		Reason:         "Pulled", Message: "  Container image pulled  \n", Type: "Normal",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: ago(10 * time.Minute), LastTimestamp: ago(2 * time.Minute), Count: 4,
	}
	modern := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "ns.1", Namespace: "default"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node"},
		Reason:              "Starting",
		Type:                "Warning",
		EventTime:           metav1.NewMicroTime(now.Add(-30 * time.Second)),
		ReportingController: "svcnet/controller-manager",
	}
	series := modern.DeepCopy()
	series.ReportingInstance = "cm-1"
	series.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-5 * time.Second))}

	cols := columns()
	if got := strings.Join(registrytest.Names(cols), ","); got != "Last Seen,Type,Reason,Object,Subobject,Source,Message,First Seen,Count,Name" {
		t.Fatalf("columns = %s", got)
	}
	if cols[9].Format != "name" || cols[9].Priority != 1 || cols[4].Priority != 1 || cols[0].Priority != 0 {
		t.Errorf("name/subobject/last seen columns have wrong format or priority")
	}
	tests := []struct {
		name string
		ev   *corev1.Event
		want []interface{}
	}{
		{"legacy", legacy, []interface{}{"2m", "Normal", "Pulled", "pod/web", "spec.containers{web}", "kubelet, node-1",
			"Container image pulled", "10m", int64(4), "web.17a"}},
		{"new style", modern, []interface{}{"30s", "Warning", "Starting", "node", "", "svcnet/controller-manager",
			"", "30s", int64(1), "ns.1"}},
		{"series", series, []interface{}{"5s", "Warning", "Starting", "node", "", "svcnet/controller-manager, cm-1",
			"", "30s", int64(7), "ns.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, c := range cols {
				if got := c.Cell(tt.ev); got != tt.want[i] {
					t.Errorf("%s = %#v, want %#v", c.Name, got, tt.want[i])
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   corev1.Event
		want []string
	}{
		{"legacy ok", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default"}}, nil},
		{"node event in default", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node"}}, nil},
		{"namespace mismatch", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "prod"}},
			[]string{`involvedObject.namespace: Invalid value: "prod": does not match event.namespace`}},
		{"new style missing fields", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default"}, EventTime: metav1.NowMicro()},
			[]string{
				"reportingController: Required value",
				// upstream also runs the qualified-name check on the empty value
				`reportingController: Invalid value: "": name part must be non-empty`,
				`reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				"reportingInstance: Required value",
				"action: Required value",
				"reason: Required value",
			}},
		{"new style complete", corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default"}, EventTime: metav1.NowMicro(),
			ReportingController: "example.com/ctl", ReportingInstance: "ctl-1", Action: "Sync", Reason: "Synced"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registrytest.ExpectErrors(t, strategy{}.Validate(&tt.ev), tt.want...)
		})
	}
}

func TestFields(t *testing.T) {
	ev := &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", UID: "u1"},
		Reason: "Killing", Type: "Normal", ReportingController: "kubelet"}
	f := selectableFields(ev)
	for k, v := range map[string]string{"involvedObject.kind": "Pod", "involvedObject.name": "web", "involvedObject.uid": "u1",
		"reason": "Killing", "type": "Normal", "source": "kubelet", "reportingComponent": "kubelet"} {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if msgs := Resource().NameValidation("web.17a3b%", false); len(msgs) == 0 {
		t.Error("event names must be path segments")
	}
}
