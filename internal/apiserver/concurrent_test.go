package apiserver

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// 200 parallel patches without a resourceVersion on one object (what
// `kubectl label` sends) all apply: like upstream's GuaranteedUpdate, an
// unconditional write retries on concurrent changes until it applies.
func TestUnconditionalPatchesAllApply(t *testing.T) {
	_, url := startTestServer(t)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hot"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			patch := fmt.Sprintf(`{"metadata":{"labels":{"l%d":"v"}}}`, i)
			if _, err := cms.Patch(ctx, "hot", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("patch: %v", err)
	}
	cm, err := cms.Get(ctx, "hot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Labels) != n {
		t.Errorf("%d labels applied, want %d", len(cm.Labels), n)
	}
}
