package storageclass

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		{"kept", ptr(corev1.PersistentVolumeReclaimRetain), ptr(storagev1.VolumeBindingWaitForFirstConsumer),
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
	tests := []struct {
		name   string
		change func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "valid", change: func(*storagev1.StorageClass) {}},
		{name: "no provisioner", change: func(sc *storagev1.StorageClass) { sc.Provisioner = "" }, want: []string{
			"provisioner: Required value",
		}},
		{name: "upper case provisioner is fine", change: func(sc *storagev1.StorageClass) { sc.Provisioner = "Example.com/Disk" }},
		{name: "bad provisioner", change: func(sc *storagev1.StorageClass) { sc.Provisioner = "a/b/c" }, want: []string{
			"provisioner: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
		}},
		{name: "bad policy and mode", change: func(sc *storagev1.StorageClass) {
			sc.ReclaimPolicy = ptr(corev1.PersistentVolumeReclaimRecycle)
			sc.VolumeBindingMode = ptr(storagev1.VolumeBindingMode("Later"))
		}, want: []string{
			"reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
			"volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
		}},
		{name: "empty parameter key", change: func(sc *storagev1.StorageClass) { sc.Parameters[""] = "x" }, want: []string{
			"parameters: Invalid value: \"\": field can not be empty.",
		}},
		{name: "topologies", change: func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{term("zone", "a", "a"), term("zone", "a"), term("zone")}
		}, want: []string{
			"allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: \"a\"",
			"allowedTopologies[1].matchLabelExpressions: Duplicate value: \"\"",
			"allowedTopologies[2].matchLabelExpressions[0].values: Required value",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := valid()
			tt.change(sc)
			if got := messages(strategy{}.Validate(sc)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "mutable fields", change: func(sc *storagev1.StorageClass) {
			sc.AllowVolumeExpansion = ptr(true)
			sc.MountOptions = []string{"debug"}
			sc.Annotations = map[string]string{defaultAnnotation: "true"}
		}},
		{name: "immutable fields", change: func(sc *storagev1.StorageClass) {
			sc.Parameters["type"] = "io2"
			sc.Provisioner = "example.com/disk"
			sc.ReclaimPolicy = ptr(corev1.PersistentVolumeReclaimRetain)
			sc.VolumeBindingMode = ptr(storagev1.VolumeBindingWaitForFirstConsumer)
		}, want: []string{
			"parameters: Forbidden: updates to parameters are forbidden.",
			"provisioner: Forbidden: updates to provisioner are forbidden.",
			"reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
			"volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := valid()
			sc := old.DeepCopy()
			tt.change(sc)
			if got := messages(strategy{}.ValidateUpdate(sc, old)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
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
			ReclaimPolicy:        ptr(corev1.PersistentVolumeReclaimRetain),
			VolumeBindingMode:    ptr(storagev1.VolumeBindingWaitForFirstConsumer),
			AllowVolumeExpansion: ptr(true),
		}, []interface{}{"gp3 (default)", "ebs.csi.aws.com", "Retain", "WaitForFirstConsumer", true, "<unknown>"}},
		{"beta annotation", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{betaDefaultAnnotation: "true"}}},
			[]interface{}{"old (default)", "", "Delete", "Immediate", false, "<unknown>"}},
		{"annotation false", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "slow", Annotations: map[string]string{defaultAnnotation: "false"}}},
			[]interface{}{"slow", "", "Delete", "Immediate", false, "<unknown>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			var cells []interface{}
			for _, c := range Resource().Columns {
				names = append(names, c.Name)
				cells = append(cells, c.Cell(tt.sc))
			}
			wantNames := []string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}
			if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(cells, tt.cells) {
				t.Errorf("columns %v %v, want %v %v", names, cells, wantNames, tt.cells)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "storageclasses" || !reflect.DeepEqual(r.ShortNames, []string{"sc"}) || r.Namespaced || r.Status || r.Generation {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
