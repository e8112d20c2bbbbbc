package openapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	crdbuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/svcnet/svcnet/internal/openapi/generated"
)

const (
	title             = "Kubernetes"
	apiVersion        = "unversioned"
	securityName      = "BearerToken"
	v2DefinitionsRoot = "#/definitions/"
	v3SchemasRoot     = "#/components/schemas/"
)

func info() *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{Title: title, Version: apiVersion}}
}

var security = []map[string][]string{{securityName: {}}}

// buildV2 renders the swagger 2.0 document for every served group-version.
// Its definitions are the transitive closure of the models the paths use,
// computed by kube-openapi's builder, which also swaps in the v2 variants of
// types such as IntOrString that publish different v2 and v3 schemas.
func buildV2(gvs []*groupVersion, idx *kindIndex) (*spec.Swagger, error) {
	var roots []string
	for _, g := range gvs {
		roots = append(roots, g.models...)
	}
	config := &common.Config{
		Info:              info(),
		GetDefinitions:    generated.GetOpenAPIDefinitions,
		GetDefinitionName: idx.definitionName,
	}
	sw, err := builder.BuildOpenAPIDefinitionsForResources(config, uniq(roots)...)
	if err != nil {
		return nil, fmt.Errorf("building v2 definitions: %w", err)
	}
	sw.Swagger = "2.0"
	sw.Info = info()
	sw.SecurityDefinitions = spec.SecurityDefinitions{securityName: &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
		Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
	}}}
	sw.Security = security
	sw.Paths = &spec.Paths{Paths: map[string]spec.PathItem{}}
	for _, g := range gvs {
		for _, rt := range g.routes {
			if _, dup := sw.Paths.Paths[rt.path]; dup {
				return nil, fmt.Errorf("building v2 paths: duplicate path %s", rt.path)
			}
			item := spec.PathItem{}
			item.Parameters = v2Params(rt.params)
			for _, op := range rt.ops {
				setOp(op.method, v2Op(op, g), &item.Get, &item.Post, &item.Put, &item.Patch, &item.Delete)
			}
			sw.Paths.Paths[rt.path] = item
		}
	}
	return sw, nil
}

func v2Params(ps []param) []spec.Parameter {
	if len(ps) == 0 {
		return nil
	}
	out := make([]spec.Parameter, 0, len(ps))
	for _, p := range sortedParams(ps) {
		sp := spec.Parameter{ParamProps: spec.ParamProps{Name: p.name, In: p.in, Description: p.description, Required: p.required}}
		sp.Type = p.typ
		sp.UniqueItems = true
		out = append(out, sp)
	}
	return out
}

func v2Ref(model string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(v2DefinitionsRoot + common.EscapeJsonPointer(model))}}
}

func v2Op(op operation, g *groupVersion) *spec.Operation {
	o := &spec.Operation{OperationProps: spec.OperationProps{
		Description: op.description,
		Consumes:    op.consumes,
		Produces:    op.produces,
		Schemes:     []string{"https"},
		Tags:        []string{newOpNaming(g.gv).tag},
		ID:          op.id,
		Parameters:  v2Params(op.params),
		Responses:   &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{}}},
	}}
	if op.body != "" {
		body := spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: true, Schema: v2Ref(op.body)}}
		o.Parameters = append([]spec.Parameter{body}, o.Parameters...)
	}
	for _, r := range op.responses {
		o.Responses.StatusCodeResponses[r.code] = spec.Response{ResponseProps: spec.ResponseProps{Description: http.StatusText(r.code), Schema: v2Ref(r.model)}}
	}
	o.Responses.StatusCodeResponses[http.StatusUnauthorized] = spec.Response{ResponseProps: spec.ResponseProps{Description: http.StatusText(http.StatusUnauthorized)}}
	o.Extensions = opExtensions(op)
	return o
}

// opExtensions are the x-kubernetes-action and, for operations on a kind,
// x-kubernetes-group-version-kind as a single object. kubectl looks up the
// PATCH operation carrying the object's GVK to decide whether the server
// validates fields and whether it accepts strategic merge patches.
func opExtensions(op operation) spec.Extensions {
	ext := spec.Extensions{}
	if op.action != "" {
		ext["x-kubernetes-action"] = op.action
	}
	if !op.gvk.Empty() {
		ext[extensionGVK] = gvkExtension{Group: op.gvk.Group, Version: op.gvk.Version, Kind: op.gvk.Kind}.value()
	}
	if len(ext) == 0 {
		return nil
	}
	return ext
}

// v3Definitions returns the generated definitions with v3 references. They
// are computed once and shared by every group-version document: builder3
// copies each schema it publishes.
func v3Definitions(idx *kindIndex) map[string]common.OpenAPIDefinition {
	return generated.GetOpenAPIDefinitions(func(name string) spec.Ref {
		published, _ := idx.definitionName(name)
		return spec.MustCreateRef(v3SchemasRoot + common.EscapeJsonPointer(published))
	})
}

// buildV3 renders the OpenAPI 3.0 document of one group-version, with the
// transitive closure of the schemas its operations use, as kube-openapi's
// builder3 computes it (dropping v2-only variants, wrapping $refs that have
// siblings in allOf).
func buildV3(g *groupVersion, defs map[string]common.OpenAPIDefinition, idx *kindIndex) (*spec3.OpenAPI, error) {
	config := &common.OpenAPIV3Config{
		Info:              info(),
		Definitions:       defs,
		GetDefinitionName: idx.definitionName,
	}
	schemas, err := builder3.BuildOpenAPIDefinitionsForResources(config, uniq(g.models)...)
	if err != nil {
		return nil, fmt.Errorf("building v3 schemas for %s: %w", g.key, err)
	}
	doc := &spec3.OpenAPI{
		Version: "3.0.0",
		Info:    info(),
		Paths:   &spec3.Paths{Paths: map[string]*spec3.Path{}},
		Components: &spec3.Components{
			Schemas: schemas,
			SecuritySchemes: spec3.SecuritySchemes{securityName: &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
				Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
			}}},
		},
		SecurityRequirement: security,
	}
	for _, rt := range g.routes {
		if _, dup := doc.Paths.Paths[rt.path]; dup {
			return nil, fmt.Errorf("building v3 paths for %s: duplicate path %s", g.key, rt.path)
		}
		item := &spec3.Path{}
		item.Parameters = v3Params(rt.params)
		for _, op := range rt.ops {
			setOp(op.method, v3Op(op, g), &item.Get, &item.Post, &item.Put, &item.Patch, &item.Delete)
		}
		doc.Paths.Paths[rt.path] = item
	}
	return doc, nil
}

func v3Params(ps []param) []*spec3.Parameter {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*spec3.Parameter, 0, len(ps))
	for _, p := range sortedParams(ps) {
		out = append(out, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
			Name: p.name, In: p.in, Description: p.description, Required: p.required,
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{p.typ}, UniqueItems: true}},
		}})
	}
	return out
}

func v3Ref(model string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(v3SchemasRoot + common.EscapeJsonPointer(model))}}
}

func v3Content(types []string, model string) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: v3Ref(model)}}
	}
	return out
}

func v3Op(op operation, g *groupVersion) *spec3.Operation {
	o := &spec3.Operation{OperationProps: spec3.OperationProps{
		Description: op.description,
		Tags:        []string{newOpNaming(g.gv).tag},
		OperationId: op.id,
		Parameters:  v3Params(op.params),
		Responses:   &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{}}},
	}}
	if op.body != "" {
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: v3Content(op.consumes, op.body), Required: true}}
	}
	for _, r := range op.responses {
		o.Responses.StatusCodeResponses[r.code] = &spec3.Response{ResponseProps: spec3.ResponseProps{
			Description: http.StatusText(r.code), Content: v3Content(op.produces, r.model),
		}}
	}
	o.Responses.StatusCodeResponses[http.StatusUnauthorized] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: http.StatusText(http.StatusUnauthorized)}}
	o.Extensions = opExtensions(op)
	return o
}

// setOp stores op in the field of a path item (v2 or v3) that serves method:
// get, post, put, patch and delete are the addresses of those fields.
func setOp[O any](method string, op O, get, post, put, patch, del *O) {
	switch method {
	case http.MethodGet:
		*get = op
	case http.MethodPost:
		*post = op
	case http.MethodPut:
		*put = op
	case http.MethodPatch:
		*patch = op
	case http.MethodDelete:
		*del = op
	}
}

// sortedParams orders parameters by name and location, as upstream does.
func sortedParams(ps []param) []param {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b param) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.in, b.in))
	})
	return out
}

func uniq(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// metaSchemas are the v3 schemas of ObjectMeta and ListMeta with what they
// refer to, under their published names.
func metaSchemas(defs map[string]common.OpenAPIDefinition, idx *kindIndex) (map[string]*spec.Schema, error) {
	config := &common.OpenAPIV3Config{Info: info(), Definitions: defs, GetDefinitionName: idx.definitionName}
	return builder3.BuildOpenAPIDefinitionsForResources(config,
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")
}

// mergeV2 adds the custom resources' documents to the built-in one, as
// upstream's apiextensions OpenAPI controller merges them.
func mergeV2(builtin *spec.Swagger, custom []*spec.Swagger) (*spec.Swagger, error) {
	if len(custom) == 0 {
		return builtin, nil
	}
	return crdbuilder.MergeSpecs(builtin, custom...)
}
