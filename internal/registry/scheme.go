package registry

import (
	"bytes"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Scheme knows every built-in Kubernetes type, CustomResourceDefinitions,
// APIServices (kube-aggregator's apiregistration.k8s.io), the metrics.k8s.io
// types and the meta.k8s.io types (Table, PartialObjectMetadata) the API server
// answers with.
var Scheme = newScheme()

// Codecs encodes and decodes JSON, YAML and protobuf for Scheme. Its
// decoders drop unknown fields (fieldValidation=Ignore); the JSON and YAML
// ones have strict variants (StrictSerializer) for Warn and Strict.
var Codecs = serializer.NewCodecFactory(Scheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := metricsv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// SetKind fills an object's apiVersion and kind from the scheme, so that it
// encodes as a self-describing document. Objects of a kind the scheme does
// not know are left alone.
func SetKind(obj runtime.Object) {
	if !obj.GetObjectKind().GroupVersionKind().Empty() {
		return
	}
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
}

// JSONCodec stores objects as self-describing JSON, so that `etcdctl get`
// shows readable documents.
type JSONCodec struct{}

var jsonSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, Scheme, Scheme, kjson.SerializerOptions{})

// Encode writes obj as JSON with its apiVersion and kind.
func (JSONCodec) Encode(obj runtime.Object) ([]byte, error) {
	SetKind(obj)
	var buf bytes.Buffer
	if err := jsonSerializer.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode reads a stored JSON document into its typed object, or into an
// Unstructured one when its kind has no Go type (a custom resource).
func (JSONCodec) Decode(data []byte) (runtime.Object, error) {
	if !customGroup(data) {
		obj, _, err := jsonSerializer.Decode(data, nil, nil)
		if !runtime.IsNotRegisteredError(err) {
			return obj, err
		}
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return u, nil
}

// customGroup reports whether a stored document is plainly of a group
// without Go types: custom resources are stored as sorted maps, which
// begin with their apiVersion, so one look at it spares the typed
// decoder's own pass over the document. Anything else says false.
func customGroup(data []byte) bool {
	rest, ok := bytes.CutPrefix(data, []byte(`{"apiVersion":"`))
	if !ok {
		return false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return false
	}
	group, _, found := bytes.Cut(rest[:end], []byte("/"))
	return found && !Scheme.IsGroupRegistered(string(group))
}
