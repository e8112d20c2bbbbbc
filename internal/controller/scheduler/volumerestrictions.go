package scheduler

// VolumeRestrictions is upstream's plugin of that name
// (pkg/scheduler/framework/plugins/volumerestrictions), for the one
// restriction svcnet's volumes can break: a claim with access mode
// ReadWriteOncePod is used by one pod at most. PreFilter (in
// volumeBinding.preFilter) finds whether a pod already placed anywhere
// uses such a claim of the pod; then every node refuses the pod as
// Unschedulable (preemption of that pod could help, upstream says), with
// upstream's reason. The claims of every placed pod are counted in the
// cache (claimUsers), assumed pods included, so that two pods placed at
// once do not both take the claim.
//
// reasonReadWriteOncePodConflict is upstream's ErrReasonReadWriteOncePodConflict.
const reasonReadWriteOncePodConflict = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"

// fitVolumeRestrictions is VolumeRestrictions' Filter.
func (st *volumeState) fitVolumeRestrictions() (reason string, resolvable bool) {
	if st.readWriteOncePodConflict {
		return reasonReadWriteOncePodConflict, true
	}
	return "", false
}
