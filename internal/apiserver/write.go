package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/registry"
)

// readBody reads a request body up to upstream's 3 MiB limit.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	return data, nil
}

// fieldValidation is the directive of validated write options, Warn by
// default as upstream.
func fieldValidation(given string) string {
	if given == "" {
		return metav1.FieldValidationWarn
	}
	return given
}

// optionsInvalid is upstream's 422 for bad query options of kind (say
// CreateOptions): `CreateOptions.meta.k8s.io "" is invalid: ...`.
func optionsInvalid(kind string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// addWarnings sends warnings the way kubectl prints them ("Warning: ...").
func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

// decodeObject decodes a body of the given media type into a new object
// of res, following the fieldValidation directive for unknown and
// duplicate fields.
func decodeObject(res *registry.Resource, kind schema.GroupVersionKind, contentType string, body []byte, directive string) (runtime.Object, []string, error) {
	if res.Unstructured != nil && kind == res.Kind {
		return decodeUnstructured(res, kind, contentType, body, directive)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = mediaJSON, nil
	}
	if err != nil {
		return nil, nil, unsupportedMedia(contentType)
	}
	info, ok := runtime.SerializerInfoForMediaType(registry.Codecs.SupportedMediaTypes(), mt)
	if !ok {
		return nil, nil, unsupportedMedia(contentType)
	}
	dec := info.Serializer
	if directive != metav1.FieldValidationIgnore && info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	into, err := registry.Scheme.New(kind)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	obj, gvk, err := dec.Decode(body, &kind, into)
	var warnings []string
	if err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		switch {
		case isStrict && obj != nil && directive == metav1.FieldValidationWarn:
			for _, e := range strictErr.Errors() {
				warnings = append(warnings, e.Error())
			}
		default:
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind.Kind, kind.Version, kind.Kind, err))
		}
	}
	if gvk != nil && gvk.GroupVersion() != kind.GroupVersion() {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), kind.GroupVersion()))
	}
	if gvk != nil && gvk.Kind != kind.Kind {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", gvk.Kind, kind.Kind))
	}
	return obj, warnings, nil
}

func unsupportedMedia(ct string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(supportedTypes(), ", ")), 0, false)
}

// managerName is the field manager of a write: the fieldManager parameter,
// else the client's user agent up to the first "/", as upstream.
func managerName(r *http.Request, given string) string {
	if given != "" {
		return given
	}
	ua := r.UserAgent()
	if i := strings.Index(ua, "/"); i >= 0 {
		ua = ua[:i]
	}
	if len(ua) > metav1validation.FieldManagerMaxLength {
		ua = ua[:metav1validation.FieldManagerMaxLength]
	}
	return ua
}

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	return createWith(w, r, ri.res, ri.res.Kind, true, func(obj runtime.Object, o writeOptions) (runtime.Object, error) {
		return s.create(r.Context(), ri.res, ri.namespace, obj, o)
	})
}

// createWith decodes a create's body as kind and answers 201 with what
// create makes of it.
func createWith(w http.ResponseWriter, r *http.Request, res *registry.Resource, kind schema.GroupVersionKind, tables bool,
	create func(obj runtime.Object, o writeOptions) (runtime.Object, error)) error {
	wr, err := readWrite(r, &metav1.CreateOptions{}, tables)
	if err != nil {
		return err
	}
	obj, warnings, err := decodeObject(res, kind, r.Header.Get("Content-Type"), wr.body, wr.directive)
	if err != nil {
		return err
	}
	out, err := create(obj, wr.o)
	if err != nil {
		return err
	}
	registry.SetKind(out)
	addWarnings(w, warnings)
	writeObject(w, http.StatusCreated, wr.f, out)
	return nil
}

// serveVirtual answers a create of a virtual resource (a review) with
// what the resource makes of the object; nothing is stored.
func (s *Server) serveVirtual(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.verb != "create" || ri.name != "" {
		return apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb)
	}
	return createWith(w, r, ri.res, ri.res.Kind, false, func(obj runtime.Object, _ writeOptions) (runtime.Object, error) {
		a, err := placeIn(ri.res, ri.namespace, obj)
		if err != nil {
			return nil, err
		}
		ri.res.Strategy.Default(obj)
		if errs := ri.res.Strategy.Validate(obj); len(errs) > 0 {
			return nil, apierrors.NewInvalid(ri.res.Kind.GroupKind(), a.GetName(), errs)
		}
		return ri.res.Create(r.Context(), ri.namespace, obj)
	})
}

// serveAction answers a create of an action subresource (a
// TokenRequest) with what the action makes of the posted object.
func (s *Server) serveAction(w http.ResponseWriter, r *http.Request, ri *requestInfo, action registry.Action) error {
	if ri.verb != "create" {
		gr := ri.res.GroupResource()
		gr.Resource += "/" + ri.subresource
		return apierrors.NewMethodNotSupported(gr, ri.verb)
	}
	return createWith(w, r, ri.res, action.Kind, false, func(obj runtime.Object, o writeOptions) (runtime.Object, error) {
		if err := s.admit(r.Context(), admission.Create, ri.res, ri.subresource, ri.namespace, ri.name, obj, nil, o.dryRun); err != nil {
			return nil, err
		}
		return action.Create(r.Context(), ri.namespace, ri.name, obj)
	})
}

// writeRequest is what create, update and patch all read first.
type writeRequest struct {
	f         outputFormat
	directive string // fieldValidation
	body      []byte
	o         writeOptions
}

// readWrite negotiates the answer's format (a Table only where tables
// says the endpoint has them), decodes the options (a Create-, Update- or
// PatchOptions), reads the body and validates the options as upstream
// does, all errors in one 422.
func readWrite(r *http.Request, opts runtime.Object, tables bool) (*writeRequest, error) {
	f, err := negotiateFor(r, tables)
	if err != nil {
		return nil, err
	}
	if err := decodeQuery(r, opts); err != nil {
		return nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	var dryRun []string
	var manager, directive, kind string
	var errs field.ErrorList
	switch o := opts.(type) {
	case *metav1.CreateOptions:
		dryRun, manager, directive, kind = o.DryRun, o.FieldManager, o.FieldValidation, "CreateOptions"
		errs = metav1validation.ValidateCreateOptions(o)
	case *metav1.UpdateOptions:
		dryRun, manager, directive, kind = o.DryRun, o.FieldManager, o.FieldValidation, "UpdateOptions"
		errs = metav1validation.ValidateUpdateOptions(o)
	case *metav1.PatchOptions:
		dryRun, manager, directive, kind = o.DryRun, o.FieldManager, o.FieldValidation, "PatchOptions"
		pt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		errs = metav1validation.ValidatePatchOptions(o, types.PatchType(pt))
	}
	if err := optionsInvalid(kind, errs); err != nil {
		return nil, err
	}
	return &writeRequest{f: plain(f), directive: fieldValidation(directive), body: body,
		o: writeOptions{dryRun: len(dryRun) > 0, manager: managerName(r, manager)}}, nil
}

// bodyKind is the kind a write to this path carries.
func bodyKind(ri *requestInfo) schema.GroupVersionKind {
	if ri.subresource == "scale" {
		return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	}
	return ri.res.Kind
}

// respondWrite answers a successful update or patch.
func respondWrite(w http.ResponseWriter, ri *requestInfo, wr *writeRequest, warnings []string, out runtime.Object, created bool) {
	addWarnings(w, warnings)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	if ri.subresource == "scale" {
		out = scaleOf(out, ri.res)
	}
	writeObject(w, code, wr.f, out)
}

func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	wr, err := readWrite(r, &metav1.UpdateOptions{}, true)
	if err != nil {
		return err
	}
	obj, warnings, err := decodeObject(ri.res, bodyKind(ri), r.Header.Get("Content-Type"), wr.body, wr.directive)
	if err != nil {
		return err
	}
	var mutate mutateFunc
	switch ri.subresource {
	case "scale":
		mutate = applyScale(ri.res, obj.(*autoscalingv1.Scale))
	case "finalize":
		mutate = applyFinalize(obj)
	default:
		mutate = func(runtime.Object) (runtime.Object, error) { return obj.DeepCopyObject(), nil }
	}
	out, created, err := s.update(r.Context(), ri.res, ri.namespace, ri.name, writeSubresource(ri), wr.o, false, mutate)
	if err != nil {
		return err
	}
	respondWrite(w, ri, wr, warnings, out, created)
	return nil
}

// writeSubresource is the subresource whose rules a write follows: a
// scale write changes spec.replicas under the main resource's rules.
func writeSubresource(ri *requestInfo) string {
	if ri.subresource == "scale" {
		return ""
	}
	return ri.subresource
}

// applyFinalize takes spec.finalizers from the submitted namespace.
func applyFinalize(submitted runtime.Object) mutateFunc {
	return func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, errors.New("finalize needs an existing namespace")
		}
		next := cur.DeepCopyObject()
		setNamespaceFinalizers(next, submitted)
		if a, _ := meta.Accessor(submitted); a.GetResourceVersion() != "" {
			meta.NewAccessor().SetResourceVersion(next, a.GetResourceVersion())
		}
		return next, nil
	}
}

func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	opts := &metav1.PatchOptions{}
	wr, err := readWrite(r, opts, true)
	if err != nil {
		return err
	}
	o, body, directive := wr.o, wr.body, wr.directive
	pt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		pt = ""
	}
	var warnings []string
	kind := bodyKind(ri)
	var mutate mutateFunc
	allowCreate := false
	if ri.res.Unstructured != nil && types.PatchType(pt) == types.StrategicMergePatchType {
		return unsupportedPatch(pt)
	}
	switch types.PatchType(pt) {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		mutate = func(cur runtime.Object) (runtime.Object, error) {
			target := cur
			if ri.subresource == "scale" {
				target = scaleOf(cur, ri.res)
			}
			patched, err := patchJSON(types.PatchType(pt), target, body)
			if err != nil {
				return nil, err
			}
			obj, ws, err := decodeObject(ri.res, kind, mediaJSON, patched, directive)
			if err != nil {
				return nil, err
			}
			warnings = ws
			// A resourceVersion in the patch is a precondition; otherwise the
			// patch applies to whatever version is current.
			if rvOf(obj) != rvOf(target) {
				return nil, apierrors.NewConflict(ri.res.GroupResource(), ri.name, errors.New(optimisticLockMsg))
			}
			meta.NewAccessor().SetResourceVersion(obj, "")
			if ri.subresource == "scale" {
				return applyScale(ri.res, obj.(*autoscalingv1.Scale))(cur)
			}
			return obj, nil
		}
	case types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
		if pt == string(types.ApplyCBORPatchType) {
			return unsupportedMedia(pt)
		}
		if ri.subresource == "scale" {
			return apierrors.NewBadRequest("server-side apply is not supported on the scale subresource")
		}
		force := opts.Force != nil && *opts.Force
		allowCreate = ri.subresource == ""
		o.applied = true
		mutate = func(cur runtime.Object) (runtime.Object, error) {
			return s.applyPatch(ri, cur, body, o.manager, force, directive)
		}
	default:
		return unsupportedMedia(pt)
	}
	if opts.Force != nil && types.PatchType(pt) != types.ApplyYAMLPatchType {
		return apierrors.NewBadRequest("force: Forbidden: may not be specified for non-apply patch")
	}
	out, created, err := s.update(r.Context(), ri.res, ri.namespace, ri.name, writeSubresource(ri), o, allowCreate, mutate)
	if err != nil {
		return err
	}
	respondWrite(w, ri, wr, warnings, out, created)
	return nil
}

// patchJSON applies a JSON, merge or strategic merge patch to obj's JSON.
func patchJSON(pt types.PatchType, obj runtime.Object, patch []byte) ([]byte, error) {
	original, err := registry.JSONCodec{}.Encode(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var out []byte
	switch pt {
	case types.JSONPatchType:
		p, perr := jsonpatch.DecodePatch(patch)
		if perr != nil {
			return nil, apierrors.NewBadRequest(perr.Error())
		}
		out, err = p.Apply(original)
	case types.MergePatchType:
		out, err = jsonpatch.MergePatch(original, patch)
	case types.StrategicMergePatchType:
		schemaObj, serr := registry.Scheme.New(obj.GetObjectKind().GroupVersionKind())
		if serr != nil {
			return nil, apierrors.NewInternalError(serr)
		}
		out, err = strategicpatch.StrategicMergePatch(original, patch, schemaObj)
	}
	if err != nil {
		return nil, patchError(err)
	}
	return out, nil
}

// patchError maps a patch library error to upstream's status.
func patchError(err error) error {
	var fieldErr *field.Error
	if errors.As(err, &fieldErr) {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{fieldErr})
	}
	if errors.Is(err, jsonpatch.ErrTestFailed) || errors.Is(err, jsonpatch.ErrMissing) {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), "", err.Error())})
	}
	return apierrors.NewBadRequest(err.Error())
}

// applyPatch runs server-side apply of body onto cur (nil: a new object).
func (s *Server) applyPatch(ri *requestInfo, cur runtime.Object, body []byte, manager string, force bool, directive string) (runtime.Object, error) {
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if u.GetObjectKind().GroupVersionKind() != ri.res.Kind {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version and kind in the data (%s) do not match the expected %s", u.GetObjectKind().GroupVersionKind(), ri.res.Kind))
	}
	// A typed object's unknown and duplicate fields are found by its
	// decoder; a custom resource's unknown fields by the field manager
	// (".spec.x: field not declared in schema"), its duplicates by a
	// strict read of the YAML, as upstream's apply does.
	if directive == metav1.FieldValidationStrict && ri.res.Unstructured == nil {
		if _, _, err := decodeObject(ri.res, ri.res.Kind, mediaJSON, js, directive); err != nil {
			return nil, err
		}
	}
	if directive == metav1.FieldValidationStrict && ri.res.Unstructured != nil {
		if err := yaml.UnmarshalStrict(body, &map[string]interface{}{}); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
		}
	}
	if u.GetName() != ri.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), ri.name))
	}
	live := cur
	if live == nil {
		if live, err = newObject(ri.res); err != nil {
			return nil, err
		}
		a, _ := meta.Accessor(live)
		a.SetName(ri.name)
		a.SetNamespace(ri.namespace)
	}
	live.GetObjectKind().SetGroupVersionKind(ri.res.Kind)
	out, err := s.fields.apply(ri.res, writeSubresource(ri), live, u, manager, force)
	if err != nil {
		return nil, err
	}
	a, _ := meta.Accessor(out)
	if cur == nil {
		a.SetResourceVersion("")
	} else if rv := u.GetResourceVersion(); rv != "" && rv != rvString(cur) {
		return nil, apierrors.NewConflict(ri.res.GroupResource(), ri.name, errors.New(optimisticLockMsg))
	} else {
		a.SetResourceVersion("")
	}
	return out, nil
}

func rvString(obj runtime.Object) string {
	a, _ := meta.Accessor(obj)
	return a.GetResourceVersion()
}

// deleteOptions reads DeleteOptions from the body and the query.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		// kubectl sends JSON without apiVersion; typed clients may send protobuf.
		kind := optionsVersion.WithKind("DeleteOptions")
		obj, _, err := registry.Codecs.UniversalDeserializer().Decode(body, &kind, opts)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to decode DeleteOptions: %v", err))
		}
		d, ok := obj.(*metav1.DeleteOptions)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("expected DeleteOptions, got %T", obj))
		}
		opts = d
	}
	q := r.URL.Query()
	if len(q) > 0 {
		if err := decodeQuery(r, opts); err != nil {
			return nil, err
		}
	}
	if err := optionsInvalid("DeleteOptions", metav1validation.ValidateDeleteOptions(opts)); err != nil {
		return nil, err
	}
	return opts, nil
}

func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	f, err := negotiate(r)
	if err != nil {
		return err
	}
	opts, err := deleteOptions(r)
	if err != nil {
		return err
	}
	if dr, ok := ri.res.Strategy.(registry.DeleteRefuser); ok {
		if err := dr.RefuseDelete(ri.name); err != nil {
			return err
		}
	}
	dryRun := len(opts.DryRun) > 0
	obj, deleted, err := s.remove(r.Context(), ri.res, ri.namespace, ri.name, opts, dryRun)
	if err != nil {
		return err
	}
	if !deleted {
		// Marked for deletion (grace, finalizers): 200, as upstream's,
		// except 202 for the old orphanDependents=false.
		code := http.StatusOK
		if o := opts.OrphanDependents; o != nil && !*o { //nolint:staticcheck // upstream's compatibility rule
			code = http.StatusAccepted
		}
		writeObject(w, code, plain(f), obj)
		return nil
	}
	if ri.res.ReturnDeletedObject {
		writeObject(w, http.StatusOK, plain(f), obj)
		return nil
	}
	a, _ := meta.Accessor(obj)
	writeObject(w, http.StatusOK, plain(f), &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: ri.name, Group: ri.res.Kind.Group, Kind: ri.res.Resource, UID: a.GetUID()},
	})
	return nil
}

func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	f, err := negotiate(r)
	if err != nil {
		return err
	}
	lopts := &metav1.ListOptions{}
	if err := decodeQuery(r, lopts); err != nil {
		return err
	}
	if err := validateList(lopts, false); err != nil {
		return err
	}
	opts, err := deleteOptions(r)
	if err != nil {
		return err
	}
	dryRun := len(opts.DryRun) > 0
	sel, err := newSelector(ri.res, lopts.LabelSelector, lopts.FieldSelector)
	if err != nil {
		return err
	}
	page, err := s.listObjects(r.Context(), ri.res, ri.namespace, &metav1.ListOptions{}, sel, false)
	if err != nil {
		return err
	}
	var removed []runtime.Object
	for _, obj := range page.Items {
		a, _ := meta.Accessor(obj)
		out, _, err := s.remove(r.Context(), ri.res, a.GetNamespace(), a.GetName(), opts, dryRun)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		removed = append(removed, out)
	}
	l, err := s.listObject(ri.res, removed, metav1.ListMeta{ResourceVersion: strconv.FormatInt(page.Revision, 10)})
	if err != nil {
		return err
	}
	writeObject(w, http.StatusOK, plain(f), l)
	return nil
}

func fieldErrors(path string, value interface{}, msg string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, msg)}
}
