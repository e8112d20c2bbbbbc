// Package history keeps a workload's ControllerRevisions, as upstream's
// pkg/controller/history for StatefulSets and DaemonSets: each revision
// holds a strategic merge patch that puts one pod template back ("$patch":
// "replace"), is named "<owner>-<hash of its data>" and numbered by
// template change. kubectl rollout history and undo read and apply the same
// patches.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/client-go/util/retry"
)

// HashLabel carries a StatefulSet revision's data hash, as upstream's
// history package; a DaemonSet's revisions carry it as
// controller-revision-hash.
const HashLabel = "controller.kubernetes.io/hash"

var appsCodec = scheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion)

// TemplatePatch is the revision data of an apps/v1 workload: its pod
// template, as a patch that replaces the template of the object it is
// applied to. It is encoded as upstream does, so that equal templates give
// equal revision names.
func TemplatePatch(obj runtime.Object) ([]byte, error) {
	data, err := runtime.Encode(appsCodec, obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var raw struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	template := raw.Spec.Template
	if template == nil {
		template = map[string]any{}
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// Hash is upstream's HashControllerRevision: FNV-32 of the data and the
// collision count, encoded to avoid vowels.
func Hash(data []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Name is "<prefix>-<hash>", the prefix cut to keep the name within 253
// characters.
func Name(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// New is the revision numbered revision of owner (of kind) holding data,
// labelled with the template's labels and the hash under hashKey; it is
// named but not yet created.
func New(owner metav1.Object, kind schema.GroupVersionKind, hashKey string, templateLabels map[string]string, data []byte, revision int64, collisionCount int32) *appsv1.ControllerRevision {
	hash := Hash(data, &collisionCount)
	labels := maps.Clone(templateLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[hashKey] = hash
	annotations := maps.Clone(owner.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Name(owner.GetName(), hash),
			Namespace:       owner.GetNamespace(),
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
}

// Apply returns obj with the revision's patch applied, decoded into out.
func Apply[T runtime.Object](obj T, revision *appsv1.ControllerRevision, out T) (T, error) {
	original, err := json.Marshal(obj)
	if err != nil {
		return out, fmt.Errorf("encode %T: %w", obj, err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, revision.Data.Raw, out)
	if err != nil {
		return out, fmt.Errorf("apply revision %s: %w", revision.Name, err)
	}
	if err := json.Unmarshal(patched, out); err != nil {
		return out, fmt.Errorf("decode revision %s applied: %w", revision.Name, err)
	}
	return out, nil
}

// Sort orders revisions by number, then age, then name.
func Sort(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Equal says whether two revisions hold the same template.
func Equal(a, b *appsv1.ControllerRevision) bool {
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// Pick is the stored revision for want (a New revision numbered one past
// the sorted history): the newest revision equal to it, renumbered to come
// last if need be (a rollback), or want itself, created. A name taken by a
// revision of other data bumps *collisions and tries the next name (and
// hash, under hashKey).
func Pick(ctx context.Context, api appsclient.ControllerRevisionInterface, history []*appsv1.ControllerRevision, want *appsv1.ControllerRevision, hashKey string, collisions *int32) (*appsv1.ControllerRevision, error) {
	var equal *appsv1.ControllerRevision
	for _, r := range history {
		if Equal(r, want) {
			equal = r
		}
	}
	switch {
	case equal != nil && equal == history[len(history)-1]:
		return equal, nil
	case equal != nil:
		return renumber(ctx, api, equal, want.Revision)
	}
	return create(ctx, api, want, hashKey, collisions)
}

func create(ctx context.Context, api appsclient.ControllerRevisionInterface, revision *appsv1.ControllerRevision, hashKey string, collisions *int32) (*appsv1.ControllerRevision, error) {
	prefix := metav1.GetControllerOfNoCopy(revision).Name
	for {
		created, err := api.Create(ctx, revision, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return nil, fmt.Errorf("create revision %s: %w", revision.Name, err)
			}
			return created, nil
		}
		existing, err := api.Get(ctx, revision.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get revision %s: %w", revision.Name, err)
		}
		if Equal(existing, revision) {
			return existing, nil
		}
		*collisions++
		hash := Hash(revision.Data.Raw, collisions)
		revision = revision.DeepCopy()
		revision.Name = Name(prefix, hash)
		revision.Labels[hashKey] = hash
	}
}

// renumber gives an earlier revision the next number: the owner went back
// to its template.
func renumber(ctx context.Context, api appsclient.ControllerRevisionInterface, revision *appsv1.ControllerRevision, number int64) (*appsv1.ControllerRevision, error) {
	updated := revision.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if updated.Revision == number {
			return nil
		}
		updated.Revision = number
		result, err := api.Update(ctx, updated, metav1.UpdateOptions{})
		if err == nil {
			updated = result
			return nil
		}
		if fresh, getErr := api.Get(ctx, revision.Name, metav1.GetOptions{}); getErr == nil {
			updated = fresh
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renumber revision %s: %w", revision.Name, err)
	}
	return updated, nil
}

// Truncate deletes the oldest revisions of the sorted history that are not
// live (used by a pod, or current), until limit (revisionHistoryLimit,
// nil for upstream's 10) remain.
func Truncate(ctx context.Context, api appsclient.ControllerRevisionInterface, history []*appsv1.ControllerRevision, live map[string]bool, limit *int32) error {
	keep := 10
	if limit != nil {
		keep = int(*limit)
	}
	var old []*appsv1.ControllerRevision
	for _, r := range history {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	if keep < 0 || len(old) <= keep {
		return nil
	}
	for _, r := range old[:len(old)-keep] {
		err := api.Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete revision %s: %w", r.Name, err)
		}
	}
	return nil
}
