package autoregister

import (
	"log/slog"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/apiservice"
)

// Priority is an APIService's place in discovery: its group's among the
// groups, its version's within the group (upstream's APIServicePriority).
type Priority struct {
	Group, Version int32
}

// customResourcePriority is what kube-apiserver's crdregistration
// controller gives every served version of a custom resource definition:
// a low group priority, and one version priority for all, so that the
// versions sort as Kubernetes versions do.
var customResourcePriority = Priority{Group: 1000, Version: 100}

// Priorities are kube-apiserver v1.37's apiVersionPriorities: its generic
// control plane's (pkg/controlplane/apiserver/aggregator.go) merged with
// its own (cmd/kube-apiserver/app/aggregator.go). A built-in group version
// missing here gets no APIService, as upstream's apiservices for
// apiregistration.k8s.io itself.
//
// One entry is svcnet's: metrics.k8s.io/v1beta1, which svcnet serves
// itself where a cluster runs metrics-server behind an APIService of
// metrics-server's priorities (100, 100); here it is a Local one.
var Priorities = map[schema.GroupVersion]Priority{
	{Group: "", Version: "v1"}:                                   {18000, 1},
	{Group: "events.k8s.io", Version: "v1"}:                      {17750, 15},
	{Group: "events.k8s.io", Version: "v1beta1"}:                 {17750, 5},
	{Group: "authentication.k8s.io", Version: "v1"}:              {17700, 15},
	{Group: "authentication.k8s.io", Version: "v1beta1"}:         {17700, 9},
	{Group: "authentication.k8s.io", Version: "v1alpha1"}:        {17700, 1},
	{Group: "authorization.k8s.io", Version: "v1"}:               {17600, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:                {17300, 15},
	{Group: "certificates.k8s.io", Version: "v1beta1"}:           {17300, 9},
	{Group: "certificates.k8s.io", Version: "v1alpha1"}:          {17300, 1},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:          {17000, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:               {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}:       {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1"}:  {16700, 12},
	{Group: "admissionregistration.k8s.io", Version: "v1alpha1"}: {16700, 9},
	{Group: "coordination.k8s.io", Version: "v1"}:                {16500, 15},
	{Group: "coordination.k8s.io", Version: "v1beta1"}:           {16500, 13},
	{Group: "coordination.k8s.io", Version: "v1alpha2"}:          {16500, 12},
	{Group: "discovery.k8s.io", Version: "v1"}:                   {16200, 15},
	{Group: "discovery.k8s.io", Version: "v1beta1"}:              {16200, 12},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}:       {16100, 21},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta3"}:  {16100, 18},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta2"}:  {16100, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta1"}:  {16100, 12},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1alpha1"}: {16100, 9},
	{Group: "internal.apiserver.k8s.io", Version: "v1alpha1"}:    {16000, 9},
	{Group: "storagemigration.k8s.io", Version: "v1"}:            {15800, 15},
	{Group: "storagemigration.k8s.io", Version: "v1beta1"}:       {15800, 9},
	// kube-apiserver's own, which win over the generic ones.
	{Group: "apps", Version: "v1"}:                    {17800, 15},
	{Group: "autoscaling", Version: "v1"}:             {17500, 15},
	{Group: "autoscaling", Version: "v2"}:             {17500, 30},
	{Group: "autoscaling", Version: "v2beta1"}:        {17500, 9},
	{Group: "autoscaling", Version: "v2beta2"}:        {17500, 1},
	{Group: "batch", Version: "v1"}:                   {17400, 15},
	{Group: "batch", Version: "v1beta1"}:              {17400, 9},
	{Group: "batch", Version: "v2alpha1"}:             {17400, 9},
	{Group: "networking.k8s.io", Version: "v1"}:       {17200, 15},
	{Group: "networking.k8s.io", Version: "v1beta1"}:  {17200, 9},
	{Group: "policy", Version: "v1"}:                  {17100, 15},
	{Group: "policy", Version: "v1beta1"}:             {17100, 9},
	{Group: "storage.k8s.io", Version: "v1"}:          {16800, 15},
	{Group: "storage.k8s.io", Version: "v1beta1"}:     {16800, 9},
	{Group: "storage.k8s.io", Version: "v1alpha1"}:    {16800, 1},
	{Group: "scheduling.k8s.io", Version: "v1"}:       {16600, 15},
	{Group: "scheduling.k8s.io", Version: "v1beta1"}:  {16600, 9},
	{Group: "scheduling.k8s.io", Version: "v1alpha3"}: {16600, 3},
	{Group: "node.k8s.io", Version: "v1"}:             {16300, 15},
	{Group: "node.k8s.io", Version: "v1alpha1"}:       {16300, 1},
	{Group: "node.k8s.io", Version: "v1beta1"}:        {16300, 9},
	{Group: "resource.k8s.io", Version: "v1"}:         {16200, 21},
	{Group: "resource.k8s.io", Version: "v1beta2"}:    {16200, 15},
	{Group: "resource.k8s.io", Version: "v1beta1"}:    {16200, 9},
	{Group: "resource.k8s.io", Version: "v1alpha3"}:   {16200, 1},
	{Group: "lifecycle.k8s.io", Version: "v1alpha1"}:  {15700, 1},
	// svcnet's: metrics-server's priorities.
	{Group: "metrics.k8s.io", Version: "v1beta1"}: {100, 100},
}

// Wanted is one APIService the loop keeps, and how.
type Wanted struct {
	APIService *apiregistrationv1.APIService
	// OnStart syncs it once per start of the loop (the API server's own
	// group versions); otherwise it is synced continuously (custom
	// resources' versions, which come and go).
	OnStart bool
}

// Desired returns, by name, the Local APIServices for the group versions
// resources serve: a built-in group version (one with a typed resource)
// with its priority from priorities, skipped when it has none, and a group
// version only custom resources serve with customResourcePriority. The
// group versions skipped are returned in order.
func Desired(resources []*registry.Resource, priorities map[schema.GroupVersion]Priority) (map[string]Wanted, []schema.GroupVersion) {
	builtin := map[schema.GroupVersion]bool{}
	for _, r := range resources {
		gv := r.Kind.GroupVersion()
		builtin[gv] = builtin[gv] || r.Unstructured == nil
	}
	out := map[string]Wanted{}
	var skipped []schema.GroupVersion
	for gv, isBuiltin := range builtin {
		p, found := priorities[gv]
		switch {
		case !isBuiltin:
			p = customResourcePriority
		case !found:
			// Upstream: an APIService without a priority could leave
			// a custom resource's group version stuck in the list.
			skipped = append(skipped, gv)
			continue
		}
		out[apiservice.Name(gv.Version, gv.Group)] = Wanted{APIService: localAPIService(gv, p), OnStart: isBuiltin}
	}
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].String() < skipped[j].String() })
	return out, skipped
}

func localAPIService(gv schema.GroupVersion, p Priority) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: apiservice.Name(gv.Version, gv.Group)},
		Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.Group, VersionPriority: p.Version},
	}
}

// logSkipped says, once per group version, which ones get no APIService.
func logSkipped(seen map[schema.GroupVersion]bool, skipped []schema.GroupVersion) {
	for _, gv := range skipped {
		if !seen[gv] {
			seen[gv] = true
			slog.Info("Skipping APIService creation", "groupVersion", gv.String())
		}
	}
}
