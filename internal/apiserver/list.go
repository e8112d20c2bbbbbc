package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	listvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// selector is a parsed labelSelector and fieldSelector pair.
type selector struct {
	labels labels.Selector
	fields fields.Selector
	res    *registry.Resource
}

// fieldSet is the selectable fields of obj: name, namespace and the kind's.
func fieldSet(res *registry.Resource, obj runtime.Object) fields.Set {
	a, _ := meta.Accessor(obj)
	set := fields.Set{"metadata.name": a.GetName()}
	if res.Namespaced {
		set["metadata.namespace"] = a.GetNamespace()
	}
	if res.Fields != nil {
		for k, v := range res.Fields(obj) {
			set[k] = v
		}
	}
	return set
}

func newSelector(res *registry.Resource, labelSel, fieldSel string) (*selector, error) {
	ls, err := labels.Parse(labelSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	empty, err := newObject(res)
	if err != nil {
		return nil, err
	}
	supported := fieldSet(res, empty)
	for _, req := range fs.Requirements() {
		if _, ok := supported[req.Field]; !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return &selector{labels: ls, fields: fs, res: res}, nil
}

func (sel *selector) everything() bool { return sel.labels.Empty() && sel.fields.Empty() }

// decodeMetadata decodes the metadata of a stored document, which gjson
// finds without reading the rest.
func decodeMetadata(data []byte) (runtime.Object, error) {
	md := gjson.GetBytes(data, "metadata")
	if !md.IsObject() {
		return nil, errors.New("decode metadata: the document has no metadata")
	}
	p := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal([]byte(md.Raw), &p.ObjectMeta); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	return p, nil
}

// prefilter is the storage's look at each stored document before it is
// decoded, for a label selector on a built-in resource (a conversion of a
// custom resource's version may change its labels): a document whose
// labels do not match is refused there, sparing its whole decoding, which
// at thousands of objects is most of a selective list's cost. gjson finds
// metadata.labels without reading further than them (they come before
// managedFields), so the look costs little. A document without metadata
// is kept, for matches to judge.
func (sel *selector) prefilter() func([]byte) bool {
	if sel.labels.Empty() || sel.res.Unstructured != nil {
		return nil
	}
	return func(data []byte) bool {
		md := gjson.GetBytes(data, "metadata")
		if !md.IsObject() {
			return true
		}
		set := labels.Set{}
		md.Get("labels").ForEach(func(k, v gjson.Result) bool {
			set[k.String()] = v.String()
			return true
		})
		return sel.labels.Matches(set)
	}
}

// matches reports whether obj, as stored, matches the selector as the
// resource serves it.
func (sel *selector) matches(obj runtime.Object) bool {
	obj, err := served(sel.res, obj)
	if err != nil {
		return false
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if !sel.labels.Matches(labels.Set(a.GetLabels())) {
		return false
	}
	return sel.fields.Empty() || sel.fields.Matches(fieldSet(sel.res, obj))
}

// continueToken is the opaque continue value: the list's revision and the
// key to start from, relative to the list's prefix.
type continueToken struct {
	APIVersion string `json:"v"`
	RV         int64  `json:"rv"`
	Start      string `json:"start"`
}

func encodeContinue(rev int64, next, pfx string) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", RV: rev, Start: next[len(pfx):]})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s, pfx string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, "", apierrors.NewBadRequest(fmt.Sprintf("continue key is not valid: %v", err))
	}
	var t continueToken
	// rv -1 (as an expired token's fresh one carries): the latest revision.
	if err := json.Unmarshal(b, &t); err != nil || t.APIVersion != "meta.k8s.io/v1" || t.RV == 0 {
		return 0, "", apierrors.NewBadRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	return max(t.RV, 0), pfx + t.Start, nil
}

// expiredContinue is upstream's answer when a continue token's revision has
// been compacted.
const expiredContinue = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."

// listObjects reads one page of a list as opts asks; with metadataOnly
// the items need only their metadata.
func (s *Server) listObjects(ctx context.Context, res *registry.Resource, ns string, opts *metav1.ListOptions, sel *selector, metadataOnly bool) (*storage.ListResult, error) {
	pfx := prefix(res, ns)
	lo := storage.ListOptions{Limit: opts.Limit}
	if !sel.everything() {
		lo.Filter, lo.Prefilter = sel.matches, sel.prefilter()
	}
	// A built-in resource's metadata is the same in every version: a
	// metadata-only list decodes the stored metadata alone, unless a
	// field selector reads more.
	if metadataOnly && sel.fields.Empty() && res.Unstructured == nil {
		lo.Decode = decodeMetadata
	}
	switch {
	case opts.Continue != "":
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		rev, start, err := decodeContinue(opts.Continue, pfx)
		if err != nil {
			return nil, err
		}
		lo.Revision, lo.Start = rev, start
	case opts.ResourceVersion != "" && opts.ResourceVersion != "0":
		rv, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || rv <= 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", opts.ResourceVersion))
		}
		exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
			(opts.ResourceVersionMatch == "" && opts.Limit > 0)
		if exact {
			lo.Revision = rv
		}
	}
	out, err := s.store.List(ctx, pfx, lo)
	var c *storage.CompactedError
	if errors.As(err, &c) {
		if opts.Continue != "" {
			// As upstream: a token to go on from the same key at the
			// latest revision, inconsistent as the message says.
			expired := apierrors.NewResourceExpired(expiredContinue)
			expired.ErrStatus.ListMeta.Continue = encodeContinue(-1, lo.Start, pfx)
			return nil, expired
		}
		cur, _ := s.store.Revision(ctx)
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", lo.Revision, cur))
	}
	if err != nil {
		return nil, storageError(err, res, "")
	}
	for i, it := range out.Items {
		if out.Items[i], err = served(res, it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// validateList is upstream's check of the options of a list or watch (of
// a delete collection too), a 422 for ListOptions.
func validateList(opts *metav1.ListOptions, watch bool) error {
	in := &metainternalversion.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Continue:             opts.Continue,
		SendInitialEvents:    opts.SendInitialEvents,
		Watch:                watch,
	}
	return optionsInvalid("ListOptions", listvalidation.ValidateListOptions(in, true))
}

// readList reads what list and watch share: the answer's format, the
// options with their table options, and the selector.
func readList(r *http.Request, ri *requestInfo) (outputFormat, *metav1.ListOptions, *metav1.TableOptions, *selector, error) {
	f, err := negotiate(r)
	if err != nil {
		return f, nil, nil, nil, err
	}
	opts, topts := &metav1.ListOptions{}, &metav1.TableOptions{}
	if err := decodeQuery(r, opts); err != nil {
		return f, nil, nil, nil, err
	}
	if err := decodeQuery(r, topts); err != nil {
		return f, nil, nil, nil, err
	}
	if err := validateList(opts, ri.verb == "watch"); err != nil {
		return f, nil, nil, nil, err
	}
	sel, err := newSelector(ri.res, opts.LabelSelector, opts.FieldSelector)
	return f, opts, topts, sel, err
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	f, opts, topts, sel, err := readList(r, ri)
	if err != nil {
		return err
	}
	page, err := s.listObjects(r.Context(), ri.res, ri.namespace, opts, sel, f.as == "PartialObjectMetadataList")
	if err != nil {
		return err
	}
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(page.Revision, 10), RemainingItemCount: page.Remaining}
	if page.Next != "" {
		lm.Continue = encodeContinue(page.Revision, page.Next, prefix(ri.res, ri.namespace))
	}
	switch f.as {
	case "Table":
		t, err := s.table(ri.res, page.Items, topts.IncludeObject, false)
		if err != nil {
			return err
		}
		t.ListMeta = lm
		writeObject(w, http.StatusOK, f, t)
	case "PartialObjectMetadataList":
		l := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}, ListMeta: lm}
		for _, o := range page.Items {
			l.Items = append(l.Items, *partialMetadata(o))
		}
		writeObject(w, http.StatusOK, f, l)
	case "PartialObjectMetadata":
		return apierrors.NewBadRequest("a list cannot be returned as PartialObjectMetadata")
	default:
		l, err := s.listObject(ri.res, page.Items, lm)
		if err != nil {
			return err
		}
		writeObject(w, http.StatusOK, f, l)
	}
	return nil
}

// listObject builds the typed list (ConfigMapList, ...) of items.
func (s *Server) listObject(res *registry.Resource, items []runtime.Object, lm metav1.ListMeta) (runtime.Object, error) {
	l, err := newList(res)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		// Items carry no apiVersion/kind, as upstream's, but for custom
		// resources, whose items are self-describing.
		if res.Unstructured == nil {
			it.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		}
	}
	if err := meta.SetList(l, items); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	la, err := meta.ListAccessor(l)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	la.SetResourceVersion(lm.ResourceVersion)
	la.SetContinue(lm.Continue)
	la.SetRemainingItemCount(lm.RemainingItemCount)
	return l, nil
}
