package cluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1apply "k8s.io/kube-aggregator/pkg/client/applyconfiguration/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// TestAPIServices starts the API server and finds a Local, Available
// APIService for every group version it serves (but its own
// apiregistration.k8s.io, as upstream), one for a custom resource's
// version while its definition lives, and a client's aggregated API
// stored as written.
func TestAPIServices(t *testing.T) {
	api, cfg := startTestAPIServer(t, APIServerOptions{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	agg := aggregatorclient.NewForConfigOrDie(cfg)
	apiServices := agg.ApiregistrationV1().APIServices()

	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			if g.Name != apiregistrationv1.GroupName {
				want = append(want, v.Version+"."+g.Name)
			}
		}
	}
	sort.Strings(want) // the core group's "v1." among them
	names := func() []string {
		list, err := apiServices.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		sort.Strings(out)
		return out
	}
	var have []string
	eventually(t, "an APIService per served group version", func() bool {
		have = names()
		return slices.Equal(have, want)
	}, func() string { return fmt.Sprintf("have %v, want %v", have, want) })
	apps, err := apiServices.Get(ctx, "v1.apps", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if apps.Labels["kube-aggregator.kubernetes.io/automanaged"] != "onstart" || apps.Spec.Service != nil ||
		apps.Spec.GroupPriorityMinimum != 17800 || apps.Spec.VersionPriority != 15 {
		t.Errorf("v1.apps %+v", apps)
	}
	if c := apps.Status.Conditions; len(c) != 1 || c[0].Type != apiregistrationv1.Available || c[0].Status != apiregistrationv1.ConditionTrue ||
		c[0].Reason != "Local" || c[0].Message != "Local APIServices are always available" {
		t.Errorf("v1.apps conditions %+v", c)
	}
	if kv, err := api.client.Get(ctx, "/registry/apiregistration.k8s.io/apiservices/v1.apps"); err != nil || len(kv.Kvs) != 1 {
		t.Errorf("v1.apps in etcd: %v %v", kv, err)
	}

	// A custom resource's version has one while it is served.
	crds := crdclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ListKind: "CronTabList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptr.To(true)}}}}},
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the custom resource's APIService", func() bool {
		s, err := apiServices.Get(ctx, "v1.stable.example.com", metav1.GetOptions{})
		return err == nil && s.Labels["kube-aggregator.kubernetes.io/automanaged"] == "true" &&
			s.Spec.GroupPriorityMinimum == 1000 && s.Spec.VersionPriority == 100
	})
	if err := crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the custom resource's APIService gone", func() bool {
		_, err := apiServices.Get(ctx, "v1.stable.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// A client's aggregated API: stored, its port defaulted, no status.
	wardle := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 200,
			InsecureSkipTLSVerify: true, Service: &apiregistrationv1.ServiceReference{Namespace: "sample-system", Name: "api"}}}
	got, err := apiServices.Create(ctx, wardle, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.Service.Port; p == nil || *p != 443 || len(got.Status.Conditions) != 0 {
		t.Errorf("created %+v", got)
	}
	// The availability controller finds no Service and says so; the
	// table's Available column shows status and reason.
	eventually(t, "the aggregated API's ServiceNotFound condition", func() bool {
		s, err := apiServices.Get(ctx, wardle.Name, metav1.GetOptions{})
		c := s.Status.Conditions
		return err == nil && len(c) == 1 && c[0].Status == apiregistrationv1.ConditionFalse && c[0].Reason == "ServiceNotFound"
	})
	table, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.example.com").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"name":"Service"`, `"name":"Available"`, `"cells":["v1alpha1.wardle.example.com","sample-system/api","False (ServiceNotFound)",`} {
		if !strings.Contains(string(table), s) {
			t.Errorf("table lacks %s: %s", s, table)
		}
	}
	// Strategic merge patches and server-side apply know the type.
	if _, err := apiServices.Patch(ctx, wardle.Name, types.StrategicMergePatchType,
		[]byte(`{"metadata":{"labels":{"a":"b"}},"spec":{"versionPriority":300}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applied, err := apiServices.Apply(ctx, apiregistrationv1apply.APIService(wardle.Name).WithLabels(map[string]string{"c": "d"}),
		metav1.ApplyOptions{FieldManager: "test", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if applied.Labels["a"] != "b" || applied.Labels["c"] != "d" || applied.Spec.VersionPriority != 300 {
		t.Errorf("patched and applied %+v", applied)
	}
	bad := wardle.DeepCopy()
	bad.Name = "v1.wardle.example.com"
	_, err = apiServices.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name: Invalid value: \"v1.wardle.example.com\": must be `spec.version+\".\"+spec.group`: \"v1alpha1.wardle.example.com\"") {
		t.Errorf("name mismatch: %v", err)
	}
}

// eventually waits for ok, and fails saying what and, if given, the
// detail of the last try.
func eventually(t *testing.T, what string, ok func() bool, detail ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, d := range detail {
				what += ": " + d()
			}
			t.Fatalf("no %s", what)
		}
	}
}
