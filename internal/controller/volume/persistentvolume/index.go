package persistentvolume

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// findBestMatch is upstream's persistentVolumeOrderedIndex.findBestMatchForClaim:
// the volumes are grouped by their access modes; of the groups that offer
// every mode the claim asks for, the one with the fewest modes is searched
// first, and within it the smallest volume that fits wins (a volume
// pre-bound to the claim wins outright). With delayBinding only pre-bound
// volumes match: the scheduler binds the others.
func findBestMatch(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, delayBinding bool) (*corev1.PersistentVolume, error) {
	groups := map[string][]*corev1.PersistentVolume{}
	var keys []string
	for _, pv := range volumes {
		k := modesKey(pv.Spec.AccessModes)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], pv)
	}
	var candidates [][]*corev1.PersistentVolume
	for _, k := range keys {
		if storagehelpers.CheckAccessModes(claim, groups[k][0]) {
			candidates = append(candidates, groups[k])
		}
	}
	slices.SortStableFunc(candidates, func(a, b []*corev1.PersistentVolume) int {
		return len(a[0].Spec.AccessModes) - len(b[0].Spec.AccessModes)
	})
	for _, group := range candidates {
		pv, err := storagehelpers.FindMatchingVolume(claim, group, nil, nil, delayBinding, true)
		if err != nil || pv != nil {
			return pv, err
		}
	}
	return nil, nil
}

// modesKey names a set of access modes, in a fixed order.
func modesKey(modes []corev1.PersistentVolumeAccessMode) string {
	var key []byte
	for i, m := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod} {
		if slices.Contains(modes, m) {
			key = append(key, byte('0'+i))
		}
	}
	return string(key)
}
