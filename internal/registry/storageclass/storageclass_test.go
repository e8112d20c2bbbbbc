package storageclass

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "fast"},
		Provisioner: "ebs.csi.aws.com",
		Parameters:  map[string]string{"type": "gp3"},
	}
	strategy{}.Default(sc)
	return sc
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name       string
		policy     *corev1.PersistentVolumeReclaimPolicy
		mode       *storagev1.VolumeBindingMode
		wantPolicy corev1.PersistentVolumeReclaimPolicy
		wantMode   storagev1.VolumeBindingMode
	}{
		{"unset", nil, nil, corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingImmediate},
		{"kept", ptr.To(corev1.PersistentVolumeReclaimRetain), ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			corev1.PersistentVolumeReclaimRetain, storagev1.VolumeBindingWaitForFirstConsumer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &storagev1.StorageClass{ReclaimPolicy: tt.policy, VolumeBindingMode: tt.mode}
			strategy{}.Default(sc)
			if *sc.ReclaimPolicy != tt.wantPolicy || *sc.VolumeBindingMode != tt.wantMode {
				t.Errorf("defaults %s, %s; want %s, %s", *sc.ReclaimPolicy, *sc.VolumeBindingMode, tt.wantPolicy, tt.wantMode)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	term := func(key string, values ...string) corev1.TopologySelectorTerm {
		return corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: values}}}
	}
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*storagev1.StorageClass]{
		{Name: "valid", Change: func(*storagev1.StorageClass) {}},
		{Name: "no provisioner", Change: func(sc *storagev1.StorageClass) { sc.Provisioner = "" }, Want: []string{
			"provisioner: Required value",
		}},
		{Name: "upper case provisioner is fine", Change: func(sc *storagev1.StorageClass) { sc.Provisioner = "Example.com/Disk" }},
		{Name: "bad provisioner", Change: func(sc *storagev1.StorageClass) { sc.Provisioner = "a/b/c" }, Want: []string{
			"provisioner: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
		}},
		{Name: "bad policy and mode", Change: func(sc *storagev1.StorageClass) {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRecycle)
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingMode("Later"))
		}, Want: []string{
			"reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
			"volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
		}},
		{Name: "empty parameter key", Change: func(sc *storagev1.StorageClass) { sc.Parameters[""] = "x" }, Want: []string{
			"parameters: Invalid value: \"\": field can not be empty.",
		}},
		{Name: "topologies", Change: func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{term("zone", "a", "a"), term("zone", "a"), term("zone")}
		}, Want: []string{
			"allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: \"a\"",
			"allowedTopologies[1].matchLabelExpressions: Duplicate value: \"\"",
			"allowedTopologies[2].matchLabelExpressions[0].values: Required value",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*storagev1.StorageClass]{
		{Name: "mutable fields", Change: func(sc *storagev1.StorageClass) {
			sc.AllowVolumeExpansion = ptr.To(true)
			sc.MountOptions = []string{"debug"}
			sc.Annotations = map[string]string{defaultAnnotation: "true"}
		}},
		{Name: "immutable fields", Change: func(sc *storagev1.StorageClass) {
			sc.Parameters["type"] = "io2"
			sc.Provisioner = "example.com/disk"
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		}, Want: []string{
			"parameters: Forbidden: updates to parameters are forbidden.",
			"provisioner: Forbidden: updates to provisioner are forbidden.",
			"reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
			"volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
		}},
	})
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name  string
		sc    *storagev1.StorageClass
		cells []interface{}
	}{
		{"defaults", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "rancher.io/local-path"},
			[]interface{}{"standard", "rancher.io/local-path", "Delete", "Immediate", false, "<unknown>"}},
		{"default class", &storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: "gp3", Annotations: map[string]string{defaultAnnotation: "true"}},
			Provisioner:          "ebs.csi.aws.com",
			ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimRetain),
			VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr.To(true),
		}, []interface{}{"gp3 (default)", "ebs.csi.aws.com", "Retain", "WaitForFirstConsumer", true, "<unknown>"}},
		{"beta annotation", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{betaDefaultAnnotation: "true"}}},
			[]interface{}{"old (default)", "", "Delete", "Immediate", false, "<unknown>"}},
		{"annotation false", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "slow", Annotations: map[string]string{defaultAnnotation: "false"}}},
			[]interface{}{"slow", "", "Delete", "Immediate", false, "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registrytest.ExpectRow(t, Resource().Columns, tt.sc,
				[]string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}, tt.cells)
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "storageclasses" || !reflect.DeepEqual(r.ShortNames, []string{"sc"}) || r.Namespaced || r.Status || r.Generation || !r.ReturnDeletedObject {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
