package deployment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/davecgh/go-spew/spew"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/rand"
)

// The annotations the controller keeps on a Deployment and its
// ReplicaSets, as upstream's.
const (
	// RevisionAnnotation numbers the templates a Deployment has rolled
	// out; `kubectl rollout history` and `rollout undo` read it.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions of a
	// ReplicaSet whose template was rolled out again.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's replicas when the
	// ReplicaSet was last scaled.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is replicas plus maxSurge at that time, the
	// base of proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"

	// maxRevisionHistoryChars bounds the revision-history annotation.
	maxRevisionHistoryChars = 2000
)

// notCopied are the Deployment annotations that are not copied to its
// ReplicaSets.
var notCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:                 true,
	RevisionHistoryAnnotation:          true,
	DesiredReplicasAnnotation:          true,
	MaxReplicasAnnotation:              true,
	appsv1.DeprecatedRollbackTo:        true,
}

// templateHash is upstream's ComputeHash: the FNV-32a hash of the
// template as go-spew prints it, with the collision count mixed in, in
// the alphabet of generated names. Using upstream's recipe gives a
// template the ReplicaSet name it would get on any cluster.
func templateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	printer.Fprintf(h, "%#v", *template)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// equalIgnoreHash compares two templates without their pod-template-hash
// labels.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

// byCreation orders ReplicaSets oldest first, by name among equals.
func byCreation(a, b *appsv1.ReplicaSet) int {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return strings.Compare(a.Name, b.Name)
	}
	if a.CreationTimestamp.Before(&b.CreationTimestamp) {
		return -1
	}
	return 1
}

// byRevision orders ReplicaSets by revision, then by creation.
func byRevision(a, b *appsv1.ReplicaSet) int {
	return cmp.Or(cmp.Compare(revision(a), revision(b)), byCreation(a, b))
}

// bySizeOlder orders the largest first and, among equals, the oldest:
// scaling down takes from old ReplicaSets first.
func bySizeOlder(a, b *appsv1.ReplicaSet) int {
	return cmp.Or(cmp.Compare(replicas(b), replicas(a)), byCreation(a, b))
}

// bySizeNewer orders the largest first and, among equals, the newest:
// scaling up adds to new ReplicaSets first.
func bySizeNewer(a, b *appsv1.ReplicaSet) int {
	return cmp.Or(cmp.Compare(replicas(b), replicas(a)), byCreation(b, a))
}

func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// revision is a ReplicaSet's revision, 0 when it has none.
func revision(rs *appsv1.ReplicaSet) int64 {
	v, ok := rs.Annotations[RevisionAnnotation]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		slog.Debug("replica set has an invalid revision", "replicaSet", rs.Namespace+"/"+rs.Name, "revision", v)
		return 0
	}
	return n
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

// findNewReplicaSet is the oldest ReplicaSet whose template is the
// Deployment's, nil if there is none.
func findNewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	slices.SortFunc(rss, byCreation)
	for _, rs := range rss {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// oldReplicaSets are all ReplicaSets but the new one.
func oldReplicaSets(rss []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if newRS == nil || rs.UID != newRS.UID {
			old = append(old, rs)
		}
	}
	return old
}

// active are the ReplicaSets that want pods.
func active(rss ...*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// sum adds up one count over ReplicaSets, nil ones skipped.
func sum(rss []*appsv1.ReplicaSet, count func(*appsv1.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += count(rs)
		}
	}
	return n
}

func specReplicas(rs *appsv1.ReplicaSet) int32      { return replicas(rs) }
func statusReplicas(rs *appsv1.ReplicaSet) int32    { return rs.Status.Replicas }
func readyReplicas(rs *appsv1.ReplicaSet) int32     { return rs.Status.ReadyReplicas }
func availableReplicas(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas }

// The rolling update decides on what the ReplicaSets' pods will be once
// their controller catches up with their spec, whichever way the race
// between the ReplicaSets' controllers goes. Upstream counts replicas and
// status as they stand; a ReplicaSet scaled down whose status still counts
// the pods it is about to delete then lets a rollout run more pods than
// maxSurge allows and, worse, fewer available than maxUnavailable allows.

// runningReplicas are the pods a ReplicaSet may run before it catches up:
// its replicas, or more while the pods of a scale-down are not yet gone.
func runningReplicas(rs *appsv1.ReplicaSet) int32 { return max(replicas(rs), rs.Status.Replicas) }

// keptAvailable are the available pods a ReplicaSet keeps: its status
// counts them, but it keeps no more than its replicas.
func keptAvailable(rs *appsv1.ReplicaSet) int32 {
	return min(rs.Status.AvailableReplicas, replicas(rs))
}

// terminatingReplicas adds up the ReplicaSets' terminating pods; it is
// unknown (nil) when one of them does not report it.
func terminatingReplicas(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

// copyAnnotations copies the Deployment's annotations to the ReplicaSet,
// all but the controller's own, and says whether any changed.
func copyAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if notCopied[k] {
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setNewReplicaSetAnnotations brings the new ReplicaSet's annotations up
// to date as upstream: the Deployment's own annotations are copied, the
// revision is raised to newRevision when lower (a template rolled out
// again keeps its earlier revisions in revision-history), and a
// ReplicaSet about to be created gets the replica annotations. It says
// whether anything changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := copyAnnotations(d, rs)
	oldRevision, had := rs.Annotations[RevisionAnnotation]
	old, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil && oldRevision != "" {
		slog.Info("not updating the revision of a replica set whose revision is not a number", "replicaSet", rs.Namespace+"/"+rs.Name, "revision", oldRevision)
		return false
	}
	if old < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
		if had {
			appendRevisionHistory(rs, oldRevision)
		}
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory adds a revision to the revision-history
// annotation, dropping the earliest ones to stay within its length limit.
func appendRevisionHistory(rs *appsv1.ReplicaSet, revision string) {
	history := rs.Annotations[RevisionHistoryAnnotation]
	if history == "" {
		rs.Annotations[RevisionHistoryAnnotation] = revision
		return
	}
	revisions := strings.Split(history, ",")
	total := len(history) + len(revision) + 1
	start := 0
	for total > maxRevisionHistoryChars && start < len(revisions) {
		total -= len(revisions[start]) + 1
		start++
	}
	if total > maxRevisionHistoryChars {
		slog.Info("not appending to the revision history of a replica set: it is at its length limit", "replicaSet", rs.Namespace+"/"+rs.Name)
		return
	}
	rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(revisions[start:], revision), ",")
}

// setReplicasAnnotations records the Deployment's size on a ReplicaSet
// and says whether it changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	want := map[string]string{
		DesiredReplicasAnnotation: strconv.Itoa(int(desired)),
		MaxReplicasAnnotation:     strconv.Itoa(int(maxReplicas)),
	}
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range want {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// replicasAnnotationsStale says whether setReplicasAnnotations would
// change the ReplicaSet.
func replicasAnnotationsStale(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	probe := &appsv1.ReplicaSet{}
	probe.Annotations = maps.Clone(rs.Annotations)
	return setReplicasAnnotations(probe, desired, maxReplicas)
}

// intAnnotation reads one of the replica annotations.
func intAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		slog.Debug("replica set has an invalid annotation", "replicaSet", rs.Namespace+"/"+rs.Name, "annotation", key, "value", v)
		return 0, false
	}
	return int32(n), true
}
