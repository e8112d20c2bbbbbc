// Package crds holds the CustomResourceDefinitions svcnet installs for the
// APIs other projects define and svcnet implements: MetalLB's metallb.io
// kinds (address pools and their announcement) and the Gateway API kinds
// of its standard channel that svcnet serves (GatewayClass, Gateway,
// HTTPRoute, ReferenceGrant). The YAML files are those projects' own,
// copied unchanged by hack/update-crds.sh from the module versions go.mod
// requires, so that manifests written for MetalLB or the Gateway API
// apply unchanged; `hack/update-crds.sh --verify` (run by CI) fails when
// they drift from go.mod.
//
// Apply installs a set as `svcnet up` installs its add-ons: server-side
// applied on every start by one field manager, then waited for until the
// API server serves them.
package crds

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

//go:embed metallb/*.yaml gateway-api/*.yaml
var files embed.FS

// Set names one project's definitions: its folder here.
type Set string

// The sets svcnet installs.
const (
	MetalLB    Set = "metallb"
	GatewayAPI Set = "gateway-api"
)

// Definition is one CustomResourceDefinition of a set.
type Definition struct {
	// CRD is the definition decoded.
	CRD *apiextensionsv1.CustomResourceDefinition
	// JSON is the project's file as JSON, what Apply sends.
	JSON []byte
}

// Load reads the definitions of set s.
func Load(s Set) ([]Definition, error) {
	names, err := fs.Glob(files, path.Join(string(s), "*.yaml"))
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions for %s", s)
	}
	out := make([]Definition, 0, len(names))
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		body, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		out = append(out, Definition{CRD: crd, JSON: body})
	}
	return out, nil
}

// FieldManager owns the fields Apply sets.
const FieldManager = "svcnet-up"

// Apply server-side applies set s's definitions (forcing ownership of what
// they say, leaving fields others set) and waits until each is
// Established, so that a controller starting next finds them served.
func Apply(ctx context.Context, client apiextensionsclient.Interface, s Set) error {
	defs, err := Load(s)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	force := true
	for _, d := range defs {
		if _, err := api.Patch(ctx, d.CRD.Name, types.ApplyPatchType, d.JSON,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("apply CustomResourceDefinition %s: %w", d.CRD.Name, err)
		}
	}
	for _, d := range defs {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, d.CRD.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not served yet: try again
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s not established: %w", d.CRD.Name, err)
		}
	}
	return nil
}
