package statefulset

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
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
)

// A StatefulSet's history is a list of ControllerRevisions, each holding a
// strategic merge patch that puts one pod template back ("$patch":
// "replace"), numbered by spec change. As upstream, a revision is named
// "<set>-<hash of its data>", and its name is the pod label
// controller-revision-hash of the pods made from it. kubectl rollout
// history and undo read and apply the same patches.

// hashLabel carries a revision's data hash, as upstream's history package.
const hashLabel = "controller.kubernetes.io/hash"

var setCodec = scheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion)

// templatePatch is the revision data of set: its pod template, as a patch
// that replaces the template of the set it is applied to. It is encoded as
// upstream does, so that equal templates give equal revision names.
func templatePatch(set *appsv1.StatefulSet) ([]byte, error) {
	data, err := runtime.Encode(setCodec, set)
	if err != nil {
		return nil, fmt.Errorf("encode statefulset: %w", err)
	}
	var raw struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("decode statefulset: %w", err)
	}
	template := raw.Spec.Template
	if template == nil {
		template = map[string]any{}
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// hashRevision is upstream's HashControllerRevision: FNV-32 of the data
// and the collision count, encoded to avoid vowels.
func hashRevision(data []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// revisionName is "<prefix>-<hash>", the prefix cut to keep the name
// within 253 characters.
func revisionName(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// newRevision is the revision of set's current template, numbered
// revision; it is named but not yet created.
func newRevision(set *appsv1.StatefulSet, revision int64, collisionCount int32) (*appsv1.ControllerRevision, error) {
	data, err := templatePatch(set)
	if err != nil {
		return nil, err
	}
	hash := hashRevision(data, &collisionCount)
	labels := maps.Clone(set.Spec.Template.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[hashLabel] = hash
	annotations := maps.Clone(set.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            revisionName(set.Name, hash),
			Namespace:       set.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, kind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}, nil
}

// applyRevision is set with its template replaced by the revision's.
func applyRevision(set *appsv1.StatefulSet, revision *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	original, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("encode statefulset: %w", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, revision.Data.Raw, &appsv1.StatefulSet{})
	if err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", revision.Name, err)
	}
	out := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, fmt.Errorf("decode revision %s applied: %w", revision.Name, err)
	}
	return out, nil
}

// sortRevisions orders revisions by number, then age, then name.
func sortRevisions(revisions []*appsv1.ControllerRevision) {
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

// equalRevisions says whether two revisions hold the same template.
func equalRevisions(a, b *appsv1.ControllerRevision) bool {
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// pickRevisions finds the current and update revisions of set among its sorted
// history, creating the update revision or renumbering an older equal one
// (a rollback) when the template changed. It returns the collision count
// to record in status.
func (c *Controller) pickRevisions(ctx context.Context, set *appsv1.StatefulSet, history []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisions int32, err error) {
	if set.Status.CollisionCount != nil {
		collisions = *set.Status.CollisionCount
	}
	next := int64(1)
	if n := len(history); n > 0 {
		next = history[n-1].Revision + 1
	}
	update, err = newRevision(set, next, collisions)
	if err != nil {
		return nil, nil, collisions, err
	}
	var equal []*appsv1.ControllerRevision
	for _, r := range history {
		if equalRevisions(r, update) {
			equal = append(equal, r)
		}
	}
	switch {
	case len(equal) > 0 && equal[len(equal)-1] == history[len(history)-1]:
		update = history[len(history)-1]
	case len(equal) > 0:
		update, err = c.renumberRevision(ctx, equal[len(equal)-1], next)
	default:
		update, err = c.createRevision(ctx, set, update, &collisions)
	}
	if err != nil {
		return nil, nil, collisions, err
	}
	for _, r := range history {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisions, nil
}

// createRevision creates the revision; a name taken by a revision with
// other data bumps the collision count and tries the next name.
func (c *Controller) createRevision(ctx context.Context, set *appsv1.StatefulSet, revision *appsv1.ControllerRevision, collisions *int32) (*appsv1.ControllerRevision, error) {
	api := c.client.AppsV1().ControllerRevisions(set.Namespace)
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
		if bytes.Equal(existing.Data.Raw, revision.Data.Raw) {
			return existing, nil
		}
		*collisions++
		hash := hashRevision(revision.Data.Raw, collisions)
		revision = revision.DeepCopy()
		revision.Name = revisionName(set.Name, hash)
		revision.Labels[hashLabel] = hash
	}
}

// renumberRevision gives an earlier revision the next number: the set went
// back to its template.
func (c *Controller) renumberRevision(ctx context.Context, revision *appsv1.ControllerRevision, number int64) (*appsv1.ControllerRevision, error) {
	api := c.client.AppsV1().ControllerRevisions(revision.Namespace)
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

// truncateHistory deletes the oldest revisions that no pod, nor the
// current or update revision, uses, until revisionHistoryLimit remain.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, live map[string]bool, history []*appsv1.ControllerRevision) error {
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	var old []*appsv1.ControllerRevision
	for _, r := range history {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	if limit < 0 || len(old) <= limit {
		return nil
	}
	for _, r := range old[:len(old)-limit] {
		err := c.client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete revision %s: %w", r.Name, err)
		}
	}
	return nil
}
