package cluster

import (
	"context"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apfconfig "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/controlplane/apfbootstrap"
)

// TestFlowControlBootstrap starts the API server and finds upstream's
// mandatory and suggested FlowSchemas and PriorityLevelConfigurations,
// defaulted and annotated for auto-update; a changed mandatory spec is
// put back by the ensurer, a suggested one opted out of auto-update is
// left alone; StorageVersionMigrations are served with their status
// subresource.
func TestFlowControlBootstrap(t *testing.T) {
	_, cfg := startTestAPIServer(t, APIServerOptions{})
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	fss, pls := cs.FlowcontrolV1().FlowSchemas(), cs.FlowcontrolV1().PriorityLevelConfigurations()

	fsList, err := fss.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(fsList.Items), len(apfconfig.MandatoryFlowSchemas)+len(apfconfig.SuggestedFlowSchemas); got != want {
		t.Errorf("%d FlowSchemas, want %d", got, want)
	}
	plList, err := pls.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(plList.Items), len(apfconfig.MandatoryPriorityLevelConfigurations)+len(apfconfig.SuggestedPriorityLevelConfigurations); got != want {
		t.Errorf("%d PriorityLevelConfigurations, want %d", got, want)
	}
	for _, name := range []string{"exempt", "catch-all", "system-leader-election", "probes", "global-default"} {
		fs, err := fss.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("FlowSchema %s: %v", name, err)
			continue
		}
		if fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "true" || fs.Generation != 1 {
			t.Errorf("FlowSchema %s: annotations %v, generation %d", name, fs.Annotations, fs.Generation)
		}
	}
	wl, err := pls.Get(ctx, "workload-low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := wl.Spec.Limited; l == nil || *l.NominalConcurrencyShares != 100 || *l.LendablePercent != 90 ||
		l.LimitResponse.Queuing == nil || l.LimitResponse.Queuing.Queues != 128 || l.LimitResponse.Queuing.HandSize != 6 {
		t.Errorf("workload-low spec %+v", wl.Spec)
	}

	// A changed mandatory spec is refused; the ensurer restores one that
	// got in before, and leaves a suggested one that opted out alone.
	catchAll, err := fss.Get(ctx, "catch-all", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	catchAll.Spec.MatchingPrecedence = 9999
	if _, err := fss.Update(ctx, catchAll, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "spec of 'catch-all' must equal the fixed value") {
		t.Errorf("changing catch-all: %v", err)
	}
	le, err := fss.Get(ctx, "system-leader-election", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	le.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	le.Spec.MatchingPrecedence = 150
	if _, err := fss.Update(ctx, le, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wl.Spec.Limited.NominalConcurrencyShares = nil // defaulted to 30; generation 2, no annotation
	delete(wl.Annotations, flowcontrolv1.AutoUpdateAnnotationKey)
	if _, err := pls.Update(ctx, wl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apfbootstrap.Ensure(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if le, err = fss.Get(ctx, "system-leader-election", metav1.GetOptions{}); err != nil || le.Spec.MatchingPrecedence != 150 {
		t.Errorf("system-leader-election after ensure: %v %+v", err, le)
	}
	if wl, err = pls.Get(ctx, "workload-low", metav1.GetOptions{}); err != nil || *wl.Spec.Limited.NominalConcurrencyShares != 30 ||
		wl.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != "false" {
		t.Errorf("workload-low after ensure: %v %+v %v", err, wl.Spec.Limited, wl.Annotations)
	}

	// StorageVersionMigrations: created with an empty status, which only
	// the status subresource writes.
	svms := cs.StoragemigrationV1().StorageVersionMigrations()
	svm, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets"},
		Spec:       storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "secrets"}},
		Status:     storagemigrationv1.StorageVersionMigrationStatus{ResourceVersion: "12"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svm.Status.ResourceVersion != "" {
		t.Errorf("status on create: %+v", svm.Status)
	}
	svm.Status.ResourceVersion = "12"
	svm.Status.Conditions = []metav1.Condition{{Type: "Running", Status: metav1.ConditionTrue, Reason: "Started", LastTransitionTime: metav1.Now()}}
	if svm, err = svms.UpdateStatus(ctx, svm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svm.Spec.Resource.Resource = "configmaps"
	if _, err := svms.Update(ctx, svm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Invalid value") {
		t.Errorf("changing the spec: %v", err)
	}
}
