package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// TestDefaultServiceCIDR starts the API server as `svcnet apiserver` does
// and finds the default ServiceCIDR, over HTTPS, with the flags' CIDRs and
// Ready=True; a deleted one comes back at the next sync.
func TestDefaultServiceCIDR(t *testing.T) {
	ctx := context.Background()
	_, cfg := startTestAPIServer(t, APIServerOptions{ServiceClusterIPRange: "10.97.0.0/16,fd00:10:97::/112"})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The API server serves only once the ServiceCIDR is there.
	sc, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.97.0.0/16", "fd00:10:97::/112"}; !slices.Equal(sc.Spec.CIDRs, want) {
		t.Errorf("cidrs %v, want %v", sc.Spec.CIDRs, want)
	}
	ready := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "Kubernetes default Service CIDR is ready" {
		t.Errorf("Ready condition %+v", ready)
	}
	managers := map[string]string{}
	for _, m := range sc.ManagedFields {
		managers[m.Manager] = string(m.Operation) + " " + m.Subresource
	}
	if managers["kube-apiserver"] != "Update " || managers["kubernetes-service-cidr-controller"] != "Apply status" {
		t.Errorf("managed fields %v", managers)
	}
	list, err := cs.Discovery().ServerResourcesForGroupVersion("networking.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, r := range list.APIResources {
		found[r.Name] = fmt.Sprintf("%s %v %v", r.Kind, r.Namespaced, r.ShortNames)
	}
	for name, want := range map[string]string{"servicecidrs": "ServiceCIDR false []", "servicecidrs/status": "ServiceCIDR false []",
		"ipaddresses": "IPAddress false [ip]"} {
		if found[name] != want {
			t.Errorf("discovery of %s: %q, want %q", name, found[name], want)
		}
	}
	// kubectl finds the kinds in OpenAPI v3 (explain, strict validation).
	doc, err := cs.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/networking.k8s.io/v1").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"/apis/networking.k8s.io/v1/servicecidrs/{name}/status"`, `"/apis/networking.k8s.io/v1/ipaddresses/{name}"`,
		`"io.k8s.api.networking.v1.ServiceCIDR"`, `"io.k8s.api.networking.v1.IPAddress"`} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("OpenAPI v3 of networking.k8s.io/v1 lacks %s", want)
		}
	}
	if testing.Short() {
		return
	}
	if err := cs.NetworkingV1().ServiceCIDRs().Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		sc, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil && len(sc.Status.Conditions) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not created again: %v %v", sc, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestExternalEtcd: the API server stores in an external etcd over plain
// HTTP when --etcd-servers names one, and refuses --etcd-cafile and its
// siblings without --etcd-servers.
func TestExternalEtcd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, etcd := storagetest.StartEmbedded(t, storage.EmbeddedConfig{})
	addr := fmt.Sprintf("127.0.0.1:%d", storagetest.FreePort(t))
	_, err := StartAPIServer(ctx, APIServerOptions{DataDir: t.TempDir(), BindAddress: addr, EtcdTLS: storage.TLSFiles{CertFile: "c.crt", KeyFile: "c.key"}})
	if want := "--etcd-cafile, --etcd-certfile and --etcd-keyfile are for --etcd-servers"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("certificates without --etcd-servers: %v, want %q", err, want)
	}
	api, err := StartAPIServer(ctx, APIServerOptions{DataDir: t.TempDir(), BindAddress: addr, EtcdServers: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := api.Wait(); err != nil {
			t.Error(err)
		}
	})
	if api.Etcd() != nil {
		t.Error("an embedded etcd started beside the external one")
	}
	resp, err := etcd.Get(ctx, "/registry/namespaces/default")
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("the default namespace is not in the external etcd: %v %v", resp, err)
	}
}
