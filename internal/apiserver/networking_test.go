package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/ipaddress"
	"github.com/svcnet/svcnet/internal/registry/servicecidr"
)

// IPAddress and ServiceCIDR through the API, as upstream serves them.
func TestIPAddressAndServiceCIDR(t *testing.T) {
	s, cs := newTestServer(t, servicecidr.Resource(), ipaddress.Resource())
	ctx := context.Background()
	ips := cs.NetworkingV1().IPAddresses()
	ref := &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}

	// generateName is the name itself, as upstream's noopNameGenerator.
	ip, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{GenerateName: "10.0.0.7"},
		Spec: networkingv1.IPAddressSpec{ParentRef: ref}}, metav1.CreateOptions{})
	if err != nil || ip.Name != "10.0.0.7" {
		t.Fatalf("create from generateName: %v %v", ip, err)
	}
	_, err = ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "2001:db8:0::1"}}, metav1.CreateOptions{})
	want := `IPAddress.networking.k8s.io "2001:db8:0::1" is invalid: [metadata.name: Invalid value: "2001:db8:0::1": must be in canonical form ("2001:db8::1"), spec.parentRef: Required value]`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("create:\n got %v\nwant %s", err, want)
	}
	ip.Spec.ParentRef = &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "other"}
	_, err = ips.Update(ctx, ip, metav1.UpdateOptions{})
	want = `IPAddress.networking.k8s.io "10.0.0.7" is invalid: spec.parentRef: Invalid value: null: field is immutable`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("update:\n got %v\nwant %s", err, want)
	}

	// kubectl prints NAME and PARENTREF: the age is an undeclared cell.
	rec := do(t, s, "GET", "/apis/networking.k8s.io/v1/ipaddresses", "", "application/json;as=Table;v=v1;g=meta.k8s.io", "")
	var table metav1.Table
	if err := json.Unmarshal(rec.Body.Bytes(), &table); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("table: %d %v %s", rec.Code, err, rec.Body)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "Name,ParentRef" || len(table.Rows) != 1 || len(table.Rows[0].Cells) != 3 ||
		table.Rows[0].Cells[0] != "10.0.0.7" || table.Rows[0].Cells[1] != "services/default/web" {
		t.Errorf("table %v %+v", names, table.Rows)
	}

	// A ServiceCIDR's status is written through its subresource only.
	cidrs := cs.NetworkingV1().ServiceCIDRs()
	ready := metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Reason: "Test", LastTransitionTime: metav1.Now().Rfc3339Copy()}
	sc, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec:   networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/16"}},
		Status: networkingv1.ServiceCIDRStatus{Conditions: []metav1.Condition{ready}}}, metav1.CreateOptions{})
	if err != nil || len(sc.Status.Conditions) != 0 {
		t.Fatalf("create kept status %v: %v", sc, err)
	}
	sc.Status.Conditions = []metav1.Condition{ready}
	if sc, err = cidrs.UpdateStatus(ctx, sc, metav1.UpdateOptions{}); err != nil || len(sc.Status.Conditions) != 1 {
		t.Fatalf("status update: %v %v", sc, err)
	}
	sc.Status.Conditions = nil
	sc.Spec.CIDRs = append(sc.Spec.CIDRs, "fd00:100::/64") // single- to dual-stack is allowed
	if sc, err = cidrs.Update(ctx, sc, metav1.UpdateOptions{}); err != nil || len(sc.Status.Conditions) != 1 || len(sc.Spec.CIDRs) != 2 {
		t.Fatalf("update: %v %v", sc, err)
	}
	sc.Spec.CIDRs = sc.Spec.CIDRs[:1]
	_, err = cidrs.Update(ctx, sc, metav1.UpdateOptions{})
	want = `ServiceCIDR.networking.k8s.io "extra" is invalid: spec.cidrs: Invalid value: ["10.100.0.0/16"]: field is immutable`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("update:\n got %v\nwant %s", err, want)
	}
}
