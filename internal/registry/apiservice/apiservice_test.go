package apiservice

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type as = *apiregistrationv1.APIService

// local is a valid Local APIService; remote one that names a Service.
func local() as {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15},
	}
}

func remote() as {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr.To[int32](443)},
			CABundle:             []byte("-----BEGIN CERTIFICATE-----"),
			GroupPriorityMinimum: 100, VersionPriority: 100},
	}
}

const (
	dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
	dns1123 = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

func TestValidateLocal(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, local, []registrytest.Case[as]{
		{Name: "valid", Change: func(as) {}},
		{Name: "the core group", Change: func(s as) {
			s.Name, s.Spec.Group, s.Spec.Version, s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = "v1.", "", "v1", 18000, 1
		}},
		{Name: "a custom resource's", Change: func(s as) {
			s.Name, s.Spec.Group, s.Spec.Version, s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = "v1beta1.stable.example.com", "stable.example.com", "v1beta1", 1000, 100
		}},
		{Name: "the name is not version.group", Change: func(s as) { s.Name = "apps.v1" }, Want: []string{
			"metadata.name: Invalid value: \"apps.v1\": must be `spec.version+\".\"+spec.group`: \"v1.apps\"",
		}},
		{Name: "a name the path check refuses is not compared", Change: func(s as) { s.Name = "a/b" }},
		{Name: "generateName is held to the same rule", Change: func(s as) { s.GenerateName = "v1." }, Want: []string{
			"metadata.generateName: Invalid value: \"v1.\": must be `spec.version+\".\"+spec.group`: \"v1.apps\"",
		}},
		{Name: "an empty group other than v1", Change: func(s as) { s.Name, s.Spec.Group, s.Spec.Version = "v2.", "", "v2" }, Want: []string{
			"spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
		}},
		{Name: "group and version", Change: func(s as) { s.Name, s.Spec.Group, s.Spec.Version = "1V.Apps_", "Apps_", "1V" }, Want: []string{
			`spec.group: Invalid value: "Apps_": ` + dns1123,
			`spec.version: Invalid value: "1V": ` + dns1035,
		}},
		{Name: "no version", Change: func(s as) { s.Name, s.Spec.Version = ".apps", "" }, Want: []string{
			`spec.version: Invalid value: "": ` + dns1035,
		}},
		{Name: "priorities out of range", Change: func(s as) { s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = 20001, 0 }, Want: []string{
			"spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
			"spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
		}},
		{Name: "the largest priorities", Change: func(s as) { s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = 20000, 1000 }},
		{Name: "negative priorities", Change: func(s as) { s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority = -1, 1001 }, Want: []string{
			"spec.groupPriorityMinimum: Invalid value: -1: must be positive and less than 20000",
			"spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
		}},
		{Name: "TLS settings without a Service", Change: func(s as) {
			s.Spec.CABundle, s.Spec.InsecureSkipTLSVerify = []byte("abc"), true
		}, Want: []string{
			`spec.caBundle: Invalid value: "3 bytes": local APIServices may not have a caBundle`,
			"spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
		}},
	})
}

func TestValidateService(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, remote, []registrytest.Case[as]{
		{Name: "valid", Change: func(as) {}},
		{Name: "insecure without a caBundle", Change: func(s as) { s.Spec.CABundle, s.Spec.InsecureSkipTLSVerify = nil, true }},
		{Name: "insecure with a caBundle", Change: func(s as) { s.Spec.InsecureSkipTLSVerify = true }, Want: []string{
			"spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
		}},
		{Name: "an empty reference", Change: func(s as) { s.Spec.Service = &apiregistrationv1.ServiceReference{} }, Want: []string{
			"spec.service.namespace: Required value",
			"spec.service.name: Required value",
			"spec.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
		}},
		{Name: "a port out of range", Change: func(s as) { s.Spec.Service.Port = ptr.To[int32](65536) }, Want: []string{
			"spec.service.port: Invalid value: 65536: port is not valid: must be between 1 and 65535, inclusive",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, local, []registrytest.Case[as]{
		{Name: "new priorities", Change: func(s as) { s.Spec.VersionPriority = 20 }},
		{Name: "a version the name does not carry", Change: func(s as) { s.Spec.Version = "v2" }, Want: []string{
			"metadata.name: Invalid value: \"v1.apps\": must be `spec.version+\".\"+spec.group`: \"v2.apps\"",
		}},
		{Name: "a condition's status", Change: func(s as) {
			s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: "Maybe"}}
		}, Want: []string{
			`status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"`,
		}},
	})
}

func TestDefault(t *testing.T) {
	s := remote()
	s.Spec.Service.Port = nil
	strategy{}.Default(s)
	if p := s.Spec.Service.Port; p == nil || *p != 443 {
		t.Errorf("port %v, want 443", p)
	}
}

func TestPrepareForCreate(t *testing.T) {
	l := registrytest.Created[as](strategy{}, local())
	if len(l.Status.Conditions) != 1 {
		t.Fatalf("conditions %+v", l.Status.Conditions)
	}
	c := l.Status.Conditions[0]
	if c.Type != apiregistrationv1.Available || c.Status != apiregistrationv1.ConditionTrue || c.Reason != "Local" ||
		c.Message != "Local APIServices are always available" || c.LastTransitionTime.IsZero() {
		t.Errorf("local condition %+v", c)
	}
	if r := registrytest.Created[as](strategy{}, remote()); len(r.Status.Conditions) != 0 {
		t.Errorf("an APIService with a Service starts with conditions %+v", r.Status.Conditions)
	}
}

func TestPrepareForStatusUpdate(t *testing.T) {
	old := local()
	old.Labels = map[string]string{"kube-aggregator.kubernetes.io/automanaged": "onstart"}
	next := old.DeepCopy()
	next.Labels = map[string]string{"a": "b"}
	next.Annotations = map[string]string{"c": "d"}
	next.Finalizers = []string{"e"}
	strategy{}.PrepareForStatusUpdate(next, old)
	if next.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" || next.Annotations != nil || next.Finalizers != nil {
		t.Errorf("status write kept %+v", next.ObjectMeta)
	}
}

func TestColumns(t *testing.T) {
	r := Resource()
	l := registrytest.Created[as](strategy{}, local())
	if got := registrytest.TextRow(t, r.Columns, l); got != "v1.apps|Local|True" {
		t.Errorf("local row %q", got)
	}
	s := remote()
	if got := registrytest.TextRow(t, r.Columns, s); got != "v1beta1.metrics.k8s.io|kube-system/metrics-server|Unknown" {
		t.Errorf("row without a condition %q", got)
	}
	s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
		Reason: "ServiceNotFound"}}
	if got := registrytest.TextRow(t, r.Columns, s); got != "v1beta1.metrics.k8s.io|kube-system/metrics-server|False (ServiceNotFound)" {
		t.Errorf("unavailable row %q", got)
	}
	s.Status.Conditions[0].Reason = ""
	if got := registrytest.TextRow(t, r.Columns, s); got != "v1beta1.metrics.k8s.io|kube-system/metrics-server|False" {
		t.Errorf("row without a reason %q", got)
	}
}

func TestNameValidation(t *testing.T) {
	r := Resource()
	for name, ok := range map[string]bool{"v1.": true, "v1.apps": true, "..": false, "a/b": false, "a%b": false} {
		if got := len(r.NameValidation(name, false)) == 0; got != ok {
			t.Errorf("name %q valid %v, want %v", name, got, ok)
		}
	}
}
