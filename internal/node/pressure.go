package node

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// Disk pressure as the kubelet's eviction manager signals it with its
// default hard thresholds: nodefs.available<10%, nodefs.inodesFree<5%, and
// imagefs.available<15%, imagefs.inodesFree<5%. Images, pod directories
// and logs share the data dir's filesystem here, so it is both nodefs and
// imagefs. Once seen, pressure is reported for the pressure transition
// period (--eviction-pressure-transition-period, 5 minutes) after the last
// observation, so that the condition does not flap.
const (
	imagefsMinAvailable             = 0.15
	inodesMinFree                   = 0.05
	defaultPressureTransitionPeriod = 5 * time.Minute
)

// diskPressure watches one filesystem.
type diskPressure struct {
	path       string
	transition time.Duration
	statfs     func(path string, st *unix.Statfs_t) error

	mu sync.Mutex
	// seen is when the signal was last observed; zero when never.
	seen time.Time
}

func newDiskPressure(path string, transition time.Duration) *diskPressure {
	return &diskPressure{path: path, transition: transition, statfs: unix.Statfs}
}

// observe reads the filesystem at now and reports whether the node is
// under disk pressure, with the signal that says so when it is seen now.
func (d *diskPressure) observe(now time.Time) (bool, string) {
	var st unix.Statfs_t
	signal := ""
	if err := d.statfs(d.path, &st); err == nil && st.Blocks > 0 {
		switch {
		case float64(st.Bavail) < imagefsMinAvailable*float64(st.Blocks):
			signal = fmt.Sprintf("imagefs.available %d bytes below the threshold of 15%% of %d",
				st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize))
		case st.Files > 0 && float64(st.Ffree) < inodesMinFree*float64(st.Files):
			signal = fmt.Sprintf("nodefs.inodesFree %d below the threshold of 5%% of %d", st.Ffree, st.Files)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if signal != "" {
		d.seen = now
	}
	return !d.seen.IsZero() && now.Sub(d.seen) < d.transition, signal
}

// conditionEvents are the kubelet's Node events for a condition's status:
// recorded as "Node <name> status is now: <event>" when it changes.
var conditionEvents = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeMemoryPressure: {corev1.ConditionFalse: "NodeHasSufficientMemory", corev1.ConditionTrue: "NodeHasInsufficientMemory"},
	corev1.NodeDiskPressure:   {corev1.ConditionFalse: "NodeHasNoDiskPressure", corev1.ConditionTrue: "NodeHasDiskPressure"},
	corev1.NodePIDPressure:    {corev1.ConditionFalse: "NodeHasSufficientPID", corev1.ConditionTrue: "NodeHasInsufficientPID"},
	corev1.NodeReady:          {corev1.ConditionFalse: "NodeNotReady", corev1.ConditionTrue: "NodeReady"},
}

// changedConditions are the events of the conditions whose status cur
// changes from old (nil: the first status), in cur's order.
func changedConditions(old *corev1.NodeStatus, cur corev1.NodeStatus) []string {
	var events []string
	for _, c := range cur.Conditions {
		o := nodeCondition(old, c.Type)
		changed := o == nil || o.Status != c.Status
		if ev := conditionEvents[c.Type][c.Status]; changed && ev != "" {
			events = append(events, ev)
		}
	}
	return events
}
