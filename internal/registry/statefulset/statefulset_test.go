package statefulset

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
	"github.com/svcnet/svcnet/internal/registry/validate"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

func valid() *appsv1.StatefulSet {
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template:    registrytest.PodTemplate(map[string]string{"app": "db"}, corev1.Container{Name: "postgres", Image: "postgres:16"}),
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
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*appsv1.StatefulSet]{{
		Name: "empty spec",
		In:   &appsv1.StatefulSet{},
		Want: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: &one}},
			RevisionHistoryLimit:                 ptr.To[int32](10),
			PersistentVolumeClaimRetentionPolicy: retain,
		}},
	}, {
		Name: "explicit rolling update without parameters stays without",
		In:   &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}},
		Want: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			Replicas:                             ptr.To[int32](1),
			PodManagementPolicy:                  appsv1.OrderedReadyPodManagement,
			UpdateStrategy:                       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			RevisionHistoryLimit:                 ptr.To[int32](10),
			PersistentVolumeClaimRetentionPolicy: retain,
		}},
	}, {
		Name: "on delete, parallel, delete-on-scale kept",
		In: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		}},
		Want: &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To[int32](1),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			UpdateStrategy:       appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](10),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		}},
	}})
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
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.StatefulSet]{
		{Name: "valid", Change: func(*appsv1.StatefulSet) {}},
		{Name: "no service name is fine", Change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "" }},
		{Name: "bad service name", Change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "DB_svc" }, Want: []string{
			"spec.serviceName: Invalid value: \"DB_svc\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
		}},
		{Name: "no selector", Change: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = nil }, Want: []string{
			"spec.selector: Required value",
			"spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`",
		}},
		{Name: "empty selector", Change: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = &metav1.LabelSelector{} }, Want: []string{
			"spec.selector: Invalid value: {}: empty selector is invalid for statefulset",
		}},
		{Name: "bad pod management policy", Change: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "Random" }, Want: []string{
			"spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
		}},
		{Name: "recreate strategy is gated off", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RecreateStatefulSetStrategyType}
		}, Want: []string{
			"spec.updateStrategy: Invalid value: {\"type\":\"Recreate\"}: must be 'RollingUpdate' or 'OnDelete'",
		}},
		{Name: "on delete with rolling parameters", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}, Want: []string{
			"spec.updateStrategy.rollingUpdate: Invalid value: {\"partition\":0,\"maxUnavailable\":1}: only allowed for updateStrategy 'RollingUpdate'",
		}},
		{Name: "negative partition, zero max unavailable", Change: func(ss *appsv1.StatefulSet) {
			zero := intstr.FromString("0%")
			ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](-1), MaxUnavailable: &zero}
		}, Want: []string{
			"spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
			"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": cannot be 0",
		}},
		{Name: "bad retention", Change: func(ss *appsv1.StatefulSet) { ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = "Keep" }, Want: []string{
			"spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
		}},
		{Name: "negative replicas and ordinals", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Replicas = ptr.To[int32](-1)
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1}
		}, Want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
			"spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0",
		}},
		{Name: "active deadline", Change: func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }, Want: []string{
			"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
		}},
	})
}

// The containers may mount the claims of the volume claim templates, which
// the pods get as volumes; other mounts must name a volume of the template.
func TestValidateMountsOfClaims(t *testing.T) {
	savedValidate, savedDefaults := workload.ValidatePodTemplate, workload.PodTemplateDefaults
	workload.ValidatePodTemplate = validate.PodTemplateSpec
	workload.PodTemplateDefaults = func(t *corev1.PodTemplateSpec) { validate.DefaultPodSpec(&t.Spec) }
	t.Cleanup(func() { workload.ValidatePodTemplate, workload.PodTemplateDefaults = savedValidate, savedDefaults })
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.StatefulSet]{
		{Name: "mount of a claim", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql"}}
		}},
		{Name: "template volume of a claim's name is replaced", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql"}}
		}},
		{Name: "mount of nothing", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log"}}
		}, Want: []string{`spec.template.spec.containers[0].volumeMounts[0].name: Not found: "logs"`}},
	})
}

func TestValidateUpdate(t *testing.T) {
	forbidden := "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', " +
		"'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*appsv1.StatefulSet]{
		{Name: "allowed fields", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Replicas = ptr.To[int32](5)
			ss.Spec.Template.Spec.Containers[0].Image = "postgres:17"
			ss.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
			ss.Spec.RevisionHistoryLimit = ptr.To[int32](3)
			ss.Spec.MinReadySeconds = 10
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 1}
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}},
		{Name: "service name", Change: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "db2" }, Want: []string{forbidden}},
		{Name: "claim templates", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, Want: []string{forbidden}},
		{Name: "pod management policy", Change: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, Want: []string{forbidden}},
		{Name: "selector", Change: func(ss *appsv1.StatefulSet) {
			ss.Spec.Selector.MatchLabels["tier"] = "x"
			ss.Spec.Template.Labels["tier"] = "x"
		}, Want: []string{forbidden}},
		{Name: "stored invalid service name is tolerated", Old: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "DB_svc" },
			Change: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](2) }},
	})
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
	ss.Spec.Replicas = ptr.To[int32](3)
	ss.Status.ReadyReplicas = 2
	registrytest.ExpectRow(t, Resource().Columns, ss, []string{"Name", "Ready", "Age", "Containers", "Images"},
		[]interface{}{"db", "2/3", "<unknown>", "postgres", "postgres:16"})
}
