package statefulset

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func ptr[T any](v T) *T { return &v }

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func valid() *appsv1.StatefulSet {
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways,
					Containers:    []corev1.Container{{Name: "postgres", Image: "postgres:16"}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
	strategy{}.Default(ss)
	return ss
}

func TestDefault(t *testing.T) {
	one := intstr.FromInt32(1)
	retain := &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}
	tests := []struct {
		name string
		in   appsv1.StatefulSetSpec
		want appsv1.StatefulSetSpec
	}{{
		name: "empty spec",
		want: appsv1.StatefulSetSpec{
			Replicas:            ptr[int32](1),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](0), MaxUnavailable: &one}},
			RevisionHistoryLimit:                 ptr[int32](10),
			PersistentVolumeClaimRetentionPolicy: retain,
		},
	}, {
		name: "explicit rolling update without parameters stays without",
		in:   appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}},
		want: appsv1.StatefulSetSpec{
			Replicas:                             ptr[int32](1),
			PodManagementPolicy:                  appsv1.OrderedReadyPodManagement,
			UpdateStrategy:                       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit:                 ptr[int32](10),
			PersistentVolumeClaimRetentionPolicy: retain,
		},
	}, {
		name: "on delete, parallel, delete-on-scale kept",
		in: appsv1.StatefulSetSpec{
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		},
		want: appsv1.StatefulSetSpec{
			Replicas:             ptr[int32](1),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: ptr[int32](10),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := &appsv1.StatefulSet{Spec: tt.in}
			strategy{}.Default(ss)
			if !reflect.DeepEqual(ss.Spec, tt.want) {
				t.Errorf("defaulted spec\n got %+v\nwant %+v", ss.Spec, tt.want)
			}
		})
	}
}

func TestDefaultCallsClaimHook(t *testing.T) {
	defer func(old func(*corev1.PersistentVolumeClaim)) { PersistentVolumeClaimDefaults = old }(PersistentVolumeClaimDefaults)
	fs := corev1.PersistentVolumeFilesystem
	PersistentVolumeClaimDefaults = func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = &fs }
	ss := valid()
	if m := ss.Spec.VolumeClaimTemplates[0].Spec.VolumeMode; m == nil || *m != fs {
		t.Errorf("claim template volumeMode = %v, want the hook's Filesystem", m)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "valid", change: func(*appsv1.StatefulSet) {}},
		{name: "no service name is fine", change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "" }},
		{name: "bad service name", change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "DB_svc" }, want: []string{
			"spec.serviceName: Invalid value: \"DB_svc\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
		}},
		{name: "no selector", change: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = nil }, want: []string{
			"spec.selector: Required value",
			"spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`",
		}},
		{name: "empty selector", change: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = &metav1.LabelSelector{} }, want: []string{
			"spec.selector: Invalid value: {}: empty selector is invalid for statefulset",
		}},
		{name: "bad pod management policy", change: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "Random" }, want: []string{
			"spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
		}},
		{name: "recreate strategy is gated off", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RecreateStatefulSetStrategyType}
		}, want: []string{
			"spec.updateStrategy: Invalid value: {\"type\":\"Recreate\"}: must be 'RollingUpdate' or 'OnDelete'",
		}},
		{name: "on delete with rolling parameters", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}, want: []string{
			"spec.updateStrategy.rollingUpdate: Invalid value: {\"partition\":0,\"maxUnavailable\":1}: only allowed for updateStrategy 'RollingUpdate'",
		}},
		{name: "negative partition, zero max unavailable", change: func(ss *appsv1.StatefulSet) {
			zero := intstr.FromString("0%")
			ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr[int32](-1), MaxUnavailable: &zero}
		}, want: []string{
			"spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
			"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": cannot be 0",
		}},
		{name: "bad retention", change: func(ss *appsv1.StatefulSet) { ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = "Keep" }, want: []string{
			"spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
		}},
		{name: "negative replicas and ordinals", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Replicas = ptr[int32](-1)
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1}
		}, want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
			"spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0",
		}},
		{name: "active deadline", change: func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.ActiveDeadlineSeconds = ptr[int64](30) }, want: []string{
			"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := valid()
			tt.change(ss)
			if got := messages(strategy{}.Validate(ss)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	forbidden := "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', " +
		"'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
	tests := []struct {
		name   string
		old    func(*appsv1.StatefulSet)
		change func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "allowed fields", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Replicas = ptr[int32](5)
			ss.Spec.Template.Spec.Containers[0].Image = "postgres:17"
			ss.Spec.UpdateStrategy.RollingUpdate.Partition = ptr[int32](2)
			ss.Spec.RevisionHistoryLimit = ptr[int32](3)
			ss.Spec.MinReadySeconds = 10
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}},
		{name: "service name", change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "db2" }, want: []string{forbidden}},
		{name: "claim templates", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, want: []string{forbidden}},
		{name: "pod management policy", change: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, want: []string{forbidden}},
		{name: "selector", change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Selector.MatchLabels["tier"] = "x"
			ss.Spec.Template.Labels["tier"] = "x"
		}, want: []string{forbidden}},
		{name: "stored invalid service name is tolerated", old: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "DB_svc" },
			change: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr[int32](2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := valid()
			if tt.old != nil {
				tt.old(old)
			}
			ss := old.DeepCopy()
			tt.change(ss)
			if got := messages(strategy{}.ValidateUpdate(ss, old)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "statefulsets" || !reflect.DeepEqual(r.ShortNames, []string{"sts"}) || !reflect.DeepEqual(r.Categories, []string{"all"}) ||
		!r.Status || !r.Generation || r.Scale == nil {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if msgs := r.NameValidation("db.primary", false); len(msgs) == 0 {
		t.Error("a dotted name passed; statefulset names are DNS labels upstream")
	}
}

func TestColumns(t *testing.T) {
	ss := valid()
	ss.Spec.Replicas = ptr[int32](3)
	ss.Status.ReadyReplicas = 2
	var names []string
	var cells []interface{}
	for _, c := range Resource().Columns {
		names = append(names, c.Name)
		cells = append(cells, c.Cell(ss))
	}
	wantNames := []string{"Name", "Ready", "Age", "Containers", "Images"}
	wantCells := []interface{}{"db", "2/3", "<unknown>", "postgres", "postgres:16"}
	if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(cells, wantCells) {
		t.Errorf("columns %v %v, want %v %v", names, cells, wantNames, wantCells)
	}
}
