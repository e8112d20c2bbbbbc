package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// An embedded etcd with a small quota fills up: writes get etcd's own
// error as upstream passes it on, /readyz says why it is not ready, and
// once objects are deleted the maintenance loop compacts, defragments and
// lifts the alarm, and writes work again.
func TestEtcdFullAndBack(t *testing.T) {
	const quota = 16 << 20
	e, cli := storagetest.StartEmbedded(t, storage.EmbeddedConfig{QuotaBackendBytes: quota})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.RunMaintenance(ctx, cli, 100*time.Millisecond)
	s, _ := startTestServerOn(t, cli)
	const cms = "/api/v1/namespaces/default/configmaps"
	big := strings.Repeat("x", 900<<10)
	create := func(name string) *http.Response {
		rec := do(t, s, "POST", cms, "application/json", "",
			fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":%q}}`, name, big))
		return rec.Result()
	}
	var created []string
	var refused *http.Response
	for i := 0; i < 4*quota/len(big) && refused == nil; i++ {
		name := fmt.Sprintf("big-%d", i)
		if r := create(name); r.StatusCode == http.StatusCreated {
			created = append(created, name)
		} else {
			refused = r
		}
	}
	if refused == nil {
		t.Fatalf("%d creates of 900 KiB under a 16 MiB quota all succeeded", len(created))
	}
	var st metav1.Status
	if err := json.NewDecoder(refused.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if refused.StatusCode != http.StatusInternalServerError || st.Code != 500 || st.Reason != "" || st.Message != "etcdserver: mvcc: database space exceeded" {
		t.Fatalf("create on a full etcd: %d %+v", refused.StatusCode, st)
	}
	if rec := do(t, s, "GET", "/readyz", "", "", ""); rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "alarm NOSPACE") {
		t.Fatalf("/readyz on a full etcd: %d %s", rec.Code, rec.Body)
	}
	if rec := do(t, s, "GET", "/livez", "", "", ""); rec.Code != http.StatusOK {
		t.Errorf("/livez on a full etcd: %d %s", rec.Code, rec.Body)
	}
	// Deletes still work, and free the space.
	for _, name := range created {
		if rec := do(t, s, "DELETE", cms+"/"+name, "", "", ""); rec.Code != http.StatusOK {
			t.Fatalf("delete %s on a full etcd: %d %s", name, rec.Code, rec.Body)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// etcd applies the disarm on its own schedule: once ready, a write
		// soon succeeds again.
		ready := do(t, s, "GET", "/readyz", "", "", "")
		code := 0
		if ready.Code == http.StatusOK {
			if code = create("after").StatusCode; code == http.StatusCreated {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write 30s after the deletes: readyz %s, create %d", ready.Body, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
