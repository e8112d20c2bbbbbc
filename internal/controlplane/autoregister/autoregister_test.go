package autoregister

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
	listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/registry"
)

func builtin(group, version, kind, plural string) *registry.Resource {
	return &registry.Resource{Kind: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Resource: plural}
}

func custom(group, version, kind, plural string) *registry.Resource {
	r := builtin(group, version, kind, plural)
	r.Unstructured = &registry.Unstructured{StorageVersion: version}
	return r
}

func spec(group, version string, groupPriority, versionPriority int32) apiregistrationv1.APIServiceSpec {
	return apiregistrationv1.APIServiceSpec{Group: group, Version: version, GroupPriorityMinimum: groupPriority, VersionPriority: versionPriority}
}

func TestDesired(t *testing.T) {
	got, skipped := Desired([]*registry.Resource{
		builtin("", "v1", "Pod", "pods"),
		builtin("", "v1", "Service", "services"),
		builtin("apps", "v1", "Deployment", "deployments"),
		builtin("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
		builtin("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
		builtin("metrics.k8s.io", "v1beta1", "PodMetrics", "pods"),
		builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
		custom("stable.example.com", "v1", "CronTab", "crontabs"),
		custom("stable.example.com", "v1beta1", "CronTab", "crontabs"),
		// A custom resource in a built-in group version leaves it
		// the built-in one's.
		custom("apps", "v1", "Widget", "widgets"),
	}, Priorities)
	want := map[string]apiregistrationv1.APIServiceSpec{
		"v1.":                        spec("", "v1", 18000, 1),
		"v1.apps":                    spec("apps", "v1", 17800, 15),
		"v1.autoscaling":             spec("autoscaling", "v1", 17500, 15),
		"v2.autoscaling":             spec("autoscaling", "v2", 17500, 30),
		"v1beta1.metrics.k8s.io":     spec("metrics.k8s.io", "v1beta1", 100, 100),
		"v1.stable.example.com":      spec("stable.example.com", "v1", 1000, 100),
		"v1beta1.stable.example.com": spec("stable.example.com", "v1beta1", 1000, 100),
	}
	onStart := map[string]bool{"v1.": true, "v1.apps": true, "v1.autoscaling": true, "v2.autoscaling": true, "v1beta1.metrics.k8s.io": true}
	for name, w := range got {
		s := w.APIService
		if s.Name != name || s.Spec.Service != nil || !reflect.DeepEqual(s.Spec, want[name]) || w.OnStart != onStart[name] {
			t.Errorf("%s: %+v (on start %v), want %+v (on start %v)", name, s, w.OnStart, want[name], onStart[name])
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("no APIService %s", name)
	}
	if len(skipped) != 1 || skipped[0] != (schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}) {
		t.Errorf("skipped %v, want apiregistration.k8s.io/v1", skipped)
	}
}

// TestPriorities checks a few rows against kube-apiserver's merged table,
// where its own entries win over the generic control plane's.
func TestPriorities(t *testing.T) {
	for gv, want := range map[schema.GroupVersion]Priority{
		{Group: "", Version: "v1"}:                                  {18000, 1},
		{Group: "events.k8s.io", Version: "v1"}:                     {17750, 15},
		{Group: "resource.k8s.io", Version: "v1alpha3"}:             {16200, 1},
		{Group: "rbac.authorization.k8s.io", Version: "v1"}:         {17000, 15},
		{Group: "admissionregistration.k8s.io", Version: "v1"}:      {16700, 15},
		{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}:      {16100, 21},
		{Group: "scheduling.k8s.io", Version: "v1alpha3"}:           {16600, 3},
		{Group: "certificates.k8s.io", Version: "v1"}:               {17300, 15},
		{Group: "storagemigration.k8s.io", Version: "v1beta1"}:      {15800, 9},
		{Group: "coordination.k8s.io", Version: "v1"}:               {16500, 15},
		{Group: "authorization.k8s.io", Version: "v1"}:              {17600, 15},
		{Group: "authentication.k8s.io", Version: "v1"}:             {17700, 15},
		{Group: "discovery.k8s.io", Version: "v1"}:                  {16200, 15},
		{Group: "internal.apiserver.k8s.io", Version: "v1alpha1"}:   {16000, 9},
		{Group: "lifecycle.k8s.io", Version: "v1alpha1"}:            {15700, 1},
		{Group: "apiextensions.k8s.io", Version: "v1"}:              {16700, 15},
		{Group: "node.k8s.io", Version: "v1"}:                       {16300, 15},
		{Group: "networking.k8s.io", Version: "v1"}:                 {17200, 15},
		{Group: "storage.k8s.io", Version: "v1"}:                    {16800, 15},
		{Group: "policy", Version: "v1"}:                            {17100, 15},
		{Group: "batch", Version: "v1"}:                             {17400, 15},
		{Group: "certificates.k8s.io", Version: "v1alpha1"}:         {17300, 1},
		{Group: "coordination.k8s.io", Version: "v1alpha2"}:         {16500, 12},
		{Group: "admissionregistration.k8s.io", Version: "v1beta1"}: {16700, 12},
	} {
		if got := Priorities[gv]; got != want {
			t.Errorf("%s: %v, want %v", gv, got, want)
		}
	}
	if len(Priorities) != 55 {
		t.Errorf("%d priorities, want upstream's 54 and metrics.k8s.io's", len(Priorities))
	}
}

func stored(name, mode string, s apiregistrationv1.APIServiceSpec) *apiregistrationv1.APIService {
	out := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: s}
	if mode != "" {
		out.Labels = map[string]string{ManagedLabel: mode}
	}
	return out
}

// TestRegister walks upstream's table: what is stored, against what is
// wanted, gives which write.
func TestRegister(t *testing.T) {
	want := func(mode string) *Wanted {
		return &Wanted{APIService: stored("v1.apps", mode, spec("apps", "v1", 17800, 15)), OnStart: mode == ManageOnStart}
	}
	old := spec("apps", "v1", 1, 1)
	for _, tt := range []struct {
		name    string
		cur     *apiregistrationv1.APIService
		desired *Wanted
		atStart bool
		done    bool
		writes  []string // verbs
	}{
		{name: "2A nothing, nothing wanted"},
		{name: "2B create once", desired: want(ManageOnStart), writes: []string{"create"}},
		{name: "2B once done", desired: want(ManageOnStart), done: true},
		{name: "2C create", desired: want(ManageContinuously), done: true, writes: []string{"create"}},
		{name: "3 not automanaged", cur: stored("v1.apps", "", old), desired: want(ManageContinuously), atStart: true},
		{name: "3 not automanaged, not wanted", cur: stored("v1.apps", "", old), atStart: true},
		{name: "4 on start, created since", cur: stored("v1.apps", ManageOnStart, old), desired: want(ManageContinuously)},
		{name: "4 on start, created since, not wanted", cur: stored("v1.apps", ManageOnStart, old)},
		{name: "5A delete once", cur: stored("v1.apps", ManageOnStart, old), atStart: true, writes: []string{"delete"}},
		{name: "5A once done", cur: stored("v1.apps", ManageOnStart, old), atStart: true, done: true},
		{name: "5B update once", cur: stored("v1.apps", ManageOnStart, old), desired: want(ManageOnStart), atStart: true, writes: []string{"update"}},
		{name: "5C update once", cur: stored("v1.apps", ManageOnStart, old), desired: want(ManageContinuously), atStart: true, writes: []string{"update"}},
		{name: "5C once done", cur: stored("v1.apps", ManageOnStart, old), desired: want(ManageContinuously), atStart: true, done: true},
		{name: "6A delete", cur: stored("v1.apps", ManageContinuously, old), done: true, writes: []string{"delete"}},
		{name: "6B update once", cur: stored("v1.apps", ManageContinuously, old), desired: want(ManageOnStart), writes: []string{"update"}},
		{name: "6C update", cur: stored("v1.apps", ManageContinuously, old), desired: want(ManageContinuously), done: true, writes: []string{"update"}},
		{name: "6C in line", cur: stored("v1.apps", ManageContinuously, spec("apps", "v1", 17800, 15)), desired: want(ManageContinuously), done: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tt.cur != nil {
				objs = append(objs, tt.cur)
				if err := indexer.Add(tt.cur); err != nil {
					t.Fatal(err)
				}
			}
			client := fake.NewSimpleClientset(objs...)
			c := &Controller{client: client, lister: listers.NewAPIServiceLister(indexer),
				desired: map[string]Wanted{}, done: map[string]bool{"v1.apps": tt.done}, atStart: map[string]bool{"v1.apps": tt.atStart}}
			if tt.desired != nil {
				c.desired["v1.apps"] = *tt.desired
			}
			wrote, err := c.register(context.Background(), "v1.apps")
			if err != nil {
				t.Fatal(err)
			}
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
				switch a.GetVerb() {
				case "update":
					if s := a.(clienttesting.UpdateAction).GetObject().(*apiregistrationv1.APIService); !reflect.DeepEqual(s.Spec, tt.desired.APIService.Spec) || !reflect.DeepEqual(s.Labels, tt.cur.Labels) {
						t.Errorf("updated to %+v", s)
					}
				case "create":
					if s := a.(clienttesting.CreateAction).GetObject().(*apiregistrationv1.APIService); !reflect.DeepEqual(s, tt.desired.APIService) {
						t.Errorf("created %+v", s)
					}
				case "delete":
					if p := a.(clienttesting.DeleteAction).GetDeleteOptions().Preconditions; p == nil || p.UID == nil || *p.UID != tt.cur.UID {
						t.Errorf("deleted without the UID precondition: %+v", p)
					}
				}
			}
			if !slices.Equal(verbs, tt.writes) || wrote != (len(tt.writes) > 0) {
				t.Errorf("writes %v (wrote %v), want %v", verbs, wrote, tt.writes)
			}
			if !c.done["v1.apps"] {
				t.Error("not marked synced")
			}
		})
	}
}

// TestRun follows the served group versions: every served one gets its
// Local APIService, Available, and a custom resource's goes with it.
func TestRun(t *testing.T) {
	set, err := registry.NewSet(
		builtin("", "v1", "Pod", "pods"),
		builtin("apps", "v1", "Deployment", "deployments"),
		builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Replace("crontabs.stable.example.com", custom("stable.example.com", "v1", "CronTab", "crontabs")); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		// Stored before the start: an old built-in group version, an
		// old custom resource's, a spec to put back, a client's
		// aggregated API and a client's Local one.
		stored("v1beta1.batch", ManageOnStart, spec("batch", "v1beta1", 17400, 9)),
		stored("v1.gone.example.com", ManageContinuously, spec("gone.example.com", "v1", 1000, 100)),
		stored("v1.apps", ManageOnStart, spec("apps", "v1", 1, 1)),
		&apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
			Spec: apiregistrationv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 2000, VersionPriority: 200,
				Service: &apiregistrationv1.ServiceReference{Namespace: "sample-system", Name: "api", Port: ptr.To[int32](443)}}},
		stored("v1.mine.example.com", "", spec("mine.example.com", "v1", 500, 10)),
	)
	c, err := New(client, set, controller.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()

	local := func(s *apiregistrationv1.APIService) string {
		var b strings.Builder
		b.WriteString(s.Name + " " + s.Labels[ManagedLabel])
		if s.Spec.Service != nil {
			b.WriteString(" service")
		}
		for _, c := range s.Status.Conditions {
			b.WriteString(" " + string(c.Type) + "=" + string(c.Status) + "/" + c.Reason)
		}
		return b.String()
	}
	await(t, client, local, []string{
		"v1. onstart Available=True/Local",
		"v1.apps onstart Available=True/Local",
		"v1.mine.example.com  Available=True/Local",
		"v1.stable.example.com true Available=True/Local",
		"v1alpha1.wardle.example.com  service",
	})
	apps, err := client.ApiregistrationV1().APIServices().Get(ctx, "v1.apps", metav1.GetOptions{})
	if err != nil || !reflect.DeepEqual(apps.Spec, spec("apps", "v1", 17800, 15)) {
		t.Errorf("v1.apps: %+v, %v", apps, err)
	}

	// A new custom resource version comes, the old one goes.
	if err := set.Replace("crontabs.stable.example.com", custom("stable.example.com", "v2", "CronTab", "crontabs")); err != nil {
		t.Fatal(err)
	}
	await(t, client, local, []string{
		"v1. onstart Available=True/Local",
		"v1.apps onstart Available=True/Local",
		"v1.mine.example.com  Available=True/Local",
		"v1alpha1.wardle.example.com  service",
		"v2.stable.example.com true Available=True/Local",
	})
	s, err := client.ApiregistrationV1().APIServices().Get(ctx, "v2.stable.example.com", metav1.GetOptions{})
	if err != nil || !reflect.DeepEqual(s.Spec, spec("stable.example.com", "v2", 1000, 100)) {
		t.Errorf("v2.stable.example.com: %+v, %v", s, err)
	}

	// A built-in one deleted stays deleted until the next start, and a
	// Local one marked unavailable is marked Available again.
	if err := client.ApiregistrationV1().APIServices().Delete(ctx, "v1.apps", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mine, err := client.ApiregistrationV1().APIServices().Get(ctx, "v1.mine.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mine.Status.Conditions[0].Status, mine.Status.Conditions[0].Reason = apiregistrationv1.ConditionFalse, "Broken"
	if _, err := client.ApiregistrationV1().APIServices().UpdateStatus(ctx, mine, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, client, local, []string{
		"v1. onstart Available=True/Local",
		"v1.mine.example.com  Available=True/Local",
		"v1alpha1.wardle.example.com  service",
		"v2.stable.example.com true Available=True/Local",
	})
	time.Sleep(100 * time.Millisecond)
	if _, err := client.ApiregistrationV1().APIServices().Get(ctx, "v1.apps", metav1.GetOptions{}); err == nil {
		t.Error("v1.apps came back within the same start")
	}
}

// await waits until the stored APIServices, each shown by show, are want.
func await(t *testing.T, client *fake.Clientset, show func(*apiregistrationv1.APIService) string, want []string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		list, err := client.ApiregistrationV1().APIServices().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for i := range list.Items {
			got = append(got, show(&list.Items[i]))
		}
		sort.Strings(got)
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("APIServices\n got %q\nwant %q", got, want)
}
