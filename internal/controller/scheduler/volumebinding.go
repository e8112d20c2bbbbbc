package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/component-helpers/storage/volume"

	"github.com/svcnet/svcnet/internal/podutil"
)

// VolumeBinding is upstream's plugin of that name
// (pkg/scheduler/framework/plugins/volumebinding): a pod's claims decide
// where it may go, and the claims that wait for their first consumer are
// bound once the pod has a node, before the pod is bound.
//
//   - PreFilter: a claim that does not exist, is being deleted or lost its
//     volume rejects the pod outright, and so does an unbound claim whose
//     class binds Immediate (the PV controller binds those, not the
//     scheduler).
//   - Filter: a bound claim's PV must accept the node by its node
//     affinity; a WaitForFirstConsumer claim needs an Available PV that
//     fits it and the node (class, access modes, capacity, selector, node
//     affinity: component-helpers' FindMatchingVolume, the PV
//     controller's own matching) or a class that can provision there (a
//     provisioner, and allowedTopologies that the node matches).
//   - Reserve and PreBind: on the chosen node a matching PV is pre-bound
//     (spec.claimRef, annotation pv.kubernetes.io/bound-by-controller), a
//     claim to provision gets volume.kubernetes.io/selected-node, and the
//     pod waits until the PV controller has bound every claim (at most
//     BindTimeout) before it is bound to the node. PVs pre-bound but not
//     yet seen so by the informer are assumed, so that two pods placed at
//     once do not take the same PV.
//
// volumeBindingName names the plugin in the messages of its failures.
const volumeBindingName = "VolumeBinding"

// Upstream's VolumeBinding reasons.
const (
	reasonBindConflict     = "node(s) didn't find available persistent volumes to bind"
	reasonNodeConflict     = "node(s) had volume node affinity conflict"
	reasonPVNotExist       = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	reasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
)

// DefaultBindTimeout is how long a pod waits for its claims to be bound
// once its node is chosen, VolumeBindingArgs' bindTimeoutSeconds default.
const DefaultBindTimeout = 600 * time.Second

// bindPollInterval is how often the wait for the claims looks again when
// no informer event woke it, upstream's poll interval.
const bindPollInterval = time.Second

// volumeBinding holds what the plugin reads and what it has assumed.
type volumeBinding struct {
	client  kubernetes.Interface
	pvcs    corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	pods    corelisters.PodLister
	timeout time.Duration

	// assumed are the PVs this scheduler pre-bound, by name, to the claim
	// (namespace/name) they are for, until the binding is done or undone;
	// guarded by the scheduler's lock.
	assumed map[string]string
	// changed wakes the binding waits when a claim or a volume changes.
	changed broadcast
}

// broadcast wakes every waiter at once: wait returns a channel that the
// next notify closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// podClaims are a pod's claims sorted as upstream's GetPodVolumeClaims
// sorts them, with the PVs that its delayed claims may bind to.
type podClaims struct {
	bound, delayed []*corev1.PersistentVolumeClaim
	// pvs are the PVs of each class a delayed claim asks for.
	pvs map[string][]*corev1.PersistentVolume
	// readWriteOncePod are the keys of the claims with access mode
	// ReadWriteOncePod, for VolumeRestrictions.
	readWriteOncePod []string
}

// staticBinding is a PV chosen for a claim; pv is the copy with the
// claimRef set, dirty when it differs from the PV as it was.
type staticBinding struct {
	pvc   *corev1.PersistentVolumeClaim
	pv    *corev1.PersistentVolume
	dirty bool
}

// podVolumes are the bindings a pod needs on one node.
type podVolumes struct {
	static    []staticBinding
	provision []*corev1.PersistentVolumeClaim
}

func (v *podVolumes) empty() bool { return v == nil || len(v.static) == 0 && len(v.provision) == 0 }

// volumeState is a pod's claims for one attempt: worked out in PreFilter,
// the volumes to bind per feasible node from Filter.
type volumeState struct {
	claims *podClaims
	// readWriteOncePodConflict is VolumeRestrictions' finding: a claim of
	// the pod with ReadWriteOncePod is used by a pod already placed.
	readWriteOncePodConflict bool
	byNode                   map[string]*podVolumes
}

// claimNames are the names of the claims a pod's volumes use, generic
// ephemeral volumes included, with whether each is ephemeral.
func claimNames(pod *corev1.Pod) (names []string, isEphemeral []bool) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			names, isEphemeral = append(names, v.PersistentVolumeClaim.ClaimName), append(isEphemeral, false)
		case v.Ephemeral != nil:
			names, isEphemeral = append(names, ephemeral.VolumeClaimName(pod, v)), append(isEphemeral, true)
		}
	}
	return names, isEphemeral
}

// podClaimKeys are namespace/name of the claims the pod uses.
func podClaimKeys(pod *corev1.Pod) []string {
	names := podutil.Claims(pod)
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = pod.Namespace + "/" + n
	}
	return keys
}

// preFilter is VolumeRestrictions' and VolumeBinding's PreFilter: nil
// state for a pod without claims, or the message that rejects the pod
// on every node.
func (b *volumeBinding) preFilter(pod *corev1.Pod, ca *cache) (*volumeState, string) {
	names, isEphemeral := claimNames(pod)
	if len(names) == 0 {
		return nil, ""
	}
	claims := &podClaims{pvs: map[string][]*corev1.PersistentVolume{}}
	for i, name := range names {
		pvc, err := b.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err) && isEphemeral[i]:
			return nil, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
		case err != nil:
			return nil, err.Error()
		case pvc.Status.Phase == corev1.ClaimLost:
			return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName)
		case pvc.DeletionTimestamp != nil:
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", pvc.Name)
		}
		if isEphemeral[i] {
			if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
				return nil, err.Error()
			}
		}
		if slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOncePod) {
			claims.readWriteOncePod = append(claims.readWriteOncePod, pod.Namespace+"/"+name)
		}
		if fullyBound(pvc) {
			claims.bound = append(claims.bound, pvc)
			continue
		}
		delayed, err := volume.IsDelayBindingMode(pvc, b.classes)
		if err != nil {
			return nil, err.Error()
		}
		if !delayed || pvc.Spec.VolumeName != "" {
			// Pre-bound claims are the PV controller's to bind, as
			// Immediate ones.
			return nil, reasonUnboundImmediate
		}
		claims.delayed = append(claims.delayed, pvc)
	}
	for _, pvc := range claims.delayed {
		class := volume.GetPersistentVolumeClaimClass(pvc)
		if _, ok := claims.pvs[class]; ok {
			continue
		}
		all, err := b.pvs.List(labels.Everything())
		if err != nil {
			return nil, err.Error()
		}
		claims.pvs[class] = slices.DeleteFunc(all, func(pv *corev1.PersistentVolume) bool {
			return volume.GetPersistentVolumeClass(pv) != class
		})
	}
	st := &volumeState{claims: claims, byNode: map[string]*podVolumes{}}
	for _, key := range claims.readWriteOncePod {
		if ca.claimUsers[key] > 0 {
			st.readWriteOncePodConflict = true
		}
	}
	return st, ""
}

// fullyBound is upstream's isPVCFullyBound: the PV controller finished
// binding the claim.
func fullyBound(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, volume.AnnBindCompleted)
}

// filter is VolumeBinding's Filter for one node: the reasons the node
// cannot take the pod's claims (all UnschedulableAndUnresolvable), or
// none, with what the pod needs bound there remembered in st.
func (b *volumeBinding) filter(st *volumeState, node *corev1.Node) []string {
	var reasons []string
	boundOK, pvsFound := true, true
	for _, pvc := range st.claims.bound {
		pv, err := b.pvs.Get(pvc.Spec.VolumeName)
		if err != nil {
			pvsFound = false
			break
		}
		if volume.CheckNodeAffinity(pv, node.Labels) != nil {
			boundOK = false
			break
		}
	}
	vols, unboundOK := &podVolumes{}, true
	if boundOK && pvsFound && len(st.claims.delayed) > 0 {
		vols, unboundOK = b.findVolumes(st.claims, node)
	}
	if !boundOK {
		reasons = append(reasons, reasonNodeConflict)
	}
	if !unboundOK {
		reasons = append(reasons, reasonBindConflict)
	}
	if !pvsFound {
		reasons = append(reasons, reasonPVNotExist)
	}
	if len(reasons) == 0 {
		st.byNode[node.Name] = vols
	}
	return reasons
}

// findVolumes binds the delayed claims on node in thought: each to the
// smallest Available PV that fits it (smallest claims first), else to a
// volume its class would provision there.
func (b *volumeBinding) findVolumes(claims *podClaims, node *corev1.Node) (*podVolumes, bool) {
	vols := &podVolumes{}
	var toMatch, toProvision []*corev1.PersistentVolumeClaim
	for _, pvc := range claims.delayed {
		if selected, ok := pvc.Annotations[volume.AnnSelectedNode]; ok {
			if selected != node.Name {
				return nil, false
			}
			toProvision = append(toProvision, pvc)
			continue
		}
		toMatch = append(toMatch, pvc)
	}
	slices.SortStableFunc(toMatch, func(x, y *corev1.PersistentVolumeClaim) int {
		xs, ys := x.Spec.Resources.Requests[corev1.ResourceStorage], y.Spec.Resources.Requests[corev1.ResourceStorage]
		return xs.Cmp(ys)
	})
	chosen := map[string]*corev1.PersistentVolume{}
	for _, pvc := range toMatch {
		pvs := claims.pvs[volume.GetPersistentVolumeClaimClass(pvc)]
		pv, err := volume.FindMatchingVolume(pvc, pvs, node, b.excluded(chosen, pvc, pvs), true, true)
		if err != nil || pv == nil {
			toProvision = append(toProvision, pvc)
			continue
		}
		chosen[pv.Name] = pv
		bound, dirty, err := volume.GetBindVolumeToClaim(pv, pvc)
		if err != nil {
			return nil, false
		}
		vols.static = append(vols.static, staticBinding{pvc: pvc, pv: bound, dirty: dirty})
	}
	// A claim no PV fits is satisfied if its class provisions here.
	for _, pvc := range toProvision {
		if !b.canProvision(pvc, node) {
			return nil, false
		}
	}
	vols.provision = toProvision
	return vols, true
}

// excluded are the PVs a claim must not take: those chosen for the pod's
// other claims, and those assumed for other claims.
func (b *volumeBinding) excluded(chosen map[string]*corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, pvs []*corev1.PersistentVolume) map[string]*corev1.PersistentVolume {
	if len(b.assumed) == 0 {
		return chosen
	}
	claim := pvc.Namespace + "/" + pvc.Name
	out := maps.Clone(chosen)
	for _, pv := range pvs {
		if c, ok := b.assumed[pv.Name]; ok && c != claim {
			out[pv.Name] = pv
		}
	}
	return out
}

// canProvision is upstream's checkVolumeProvisions for one claim: its
// class has a provisioner and its allowedTopologies admit the node.
func (b *volumeBinding) canProvision(pvc *corev1.PersistentVolumeClaim, node *corev1.Node) bool {
	class, err := b.classes.Get(volume.GetPersistentVolumeClaimClass(pvc))
	if err != nil || class.Provisioner == "" || class.Provisioner == volume.NotSupportedProvisioner {
		return false
	}
	return matchTopology(class.AllowedTopologies, node.Labels)
}

// matchTopology tells whether node labels satisfy a StorageClass's
// allowedTopologies: no terms admit every node, else one term whose
// every expression the labels meet.
func matchTopology(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchLabelExpressions {
			if v, has := nodeLabels[e.Key]; !has || !slices.Contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// assume is Reserve: the PVs the pod takes on node are its claims' from
// now on, in the scheduler's mind. It returns what is left to bind, nil
// when every claim is bound.
func (b *volumeBinding) assume(st *volumeState, node string) *podVolumes {
	if st == nil {
		return nil
	}
	vols := st.byNode[node]
	if vols.empty() {
		return nil
	}
	if b.assumed == nil {
		b.assumed = map[string]string{}
	}
	for _, sb := range vols.static {
		b.assumed[sb.pv.Name] = sb.pvc.Namespace + "/" + sb.pvc.Name
	}
	for i, pvc := range vols.provision {
		c := pvc.DeepCopy()
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnSelectedNode, node)
		vols.provision[i] = c
	}
	return vols
}

// forget undoes assume's PVs: they are bound, or the binding failed.
func (b *volumeBinding) forget(vols *podVolumes) {
	for _, sb := range vols.static {
		delete(b.assumed, sb.pv.Name)
	}
}

// preBind is PreBind: it writes the pre-bound PVs and the claims to
// provision, then waits until the PV controller has bound them all, the
// pod is gone, or the bind timeout passes. nodeOf reads the chosen node
// as the scheduler knows it.
func (b *volumeBinding) preBind(ctx context.Context, pod *corev1.Pod, node string, vols *podVolumes, nodeOf func() *corev1.Node) error {
	for i, sb := range vols.static {
		if !sb.dirty {
			continue
		}
		pv, err := b.client.CoreV1().PersistentVolumes().Update(ctx, sb.pv, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		vols.static[i].pv = pv
	}
	for i, pvc := range vols.provision {
		c, err := b.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		vols.provision[i] = c
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	tick := time.NewTicker(bindPollInterval)
	defer tick.Stop()
	for {
		woken := b.changed.wait()
		done, err := b.checkBindings(pod, node, vols, nodeOf())
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("binding volumes: %w", ctx.Err())
		case <-woken:
		case <-tick.C:
		}
	}
}

// checkBindings is upstream's: true once every claim is fully bound, an
// error when the binding was undone (the PV's claimRef dropped, the
// provisioner gave the claim back) or the pod is gone.
func (b *volumeBinding) checkBindings(pod *corev1.Pod, nodeName string, vols *podVolumes, node *corev1.Node) (bool, error) {
	if node == nil {
		return false, fmt.Errorf("failed to get node %q: node %q not found", nodeName, nodeName)
	}
	if _, err := b.pods.Pods(pod.Namespace).Get(pod.Name); apierrors.IsNotFound(err) {
		return false, fmt.Errorf("pod does not exist any more: %w", err)
	}
	for _, sb := range vols.static {
		pv, err := b.pvs.Get(sb.pv.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		pvc, err := b.pvcs.PersistentVolumeClaims(sb.pvc.Namespace).Get(sb.pvc.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if older(pv.ResourceVersion, sb.pv.ResourceVersion) {
			return false, nil
		}
		if err := volume.CheckNodeAffinity(pv, node.Labels); err != nil {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
		}
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", pv.Name)
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	for _, claim := range vols.provision {
		pvc, err := b.pvcs.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check provisioning pvc: %w", err)
		}
		if older(pvc.ResourceVersion, claim.ResourceVersion) {
			return false, nil
		}
		if pvc.Annotations[volume.AnnSelectedNode] != nodeName {
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := b.pvs.Get(pvc.Spec.VolumeName)
			if apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, fmt.Errorf("failed to get pv %q from cache: %w", pvc.Spec.VolumeName, err)
			}
			if err := volume.CheckNodeAffinity(pv, node.Labels); err != nil {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q: %w", pv.Name, node.Name, err)
			}
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	return true, nil
}

// older tells whether resource version seen is older than written (both
// etcd revisions, as the API server's versioner compares them).
func older(seen, written string) bool {
	s, err1 := strconv.ParseUint(seen, 10, 64)
	w, err2 := strconv.ParseUint(written, 10, 64)
	return errors.Join(err1, err2) == nil && s < w
}

// storageClassChanged tells whether a StorageClass update may let a pod
// fit: upstream's queueing hint looks at allowedTopologies alone.
func storageClassChanged(old, cur *storagev1.StorageClass) bool {
	return old == nil || !equality.Semantic.DeepEqual(old.AllowedTopologies, cur.AllowedTopologies)
}
