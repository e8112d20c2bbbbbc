package node

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/svcnet/svcnet/internal/node/fsstats"
	"github.com/svcnet/svcnet/internal/node/procstat"
)

// The kubelet's /stats/summary (stats/v1alpha1 Summary): the node's and
// each pod's CPU and memory as procstat measures them (the numbers of
// /metrics/resource), and each pod's emptyDir and claim volumes under
// pods[].volume[], a claim's with its pvcRef: the capacity, available
// space and inodes of the filesystem that holds the volume, and what the
// volume's own tree uses (see internal/node/fsstats). hostPath volumes are
// not reported, as upstream's hostPath plugin reports no metrics.

// summary serves /stats/summary.
func (a *Agent) summary(w http.ResponseWriter, _ *http.Request) {
	now := metav1.Now()
	sum := statsapi.Summary{Node: statsapi.NodeStats{NodeName: a.cfg.NodeName, StartTime: bootTime()}, Pods: []statsapi.PodStats{}}
	if node, err := procstat.Node(procRoot); err != nil {
		slog.Warn("measure the node's usage", "err", err)
	} else {
		sum.Node.CPU, sum.Node.Memory = cpuMemory(now, node)
	}
	snap, err := procstat.Take(procRoot)
	if err != nil {
		slog.Warn("measure the containers' usage", "err", err)
	}
	for _, pod := range listPods(a.podLister) {
		ps := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
			Containers: []statsapi.ContainerStats{},
		}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		}
		if snap != nil {
			if usage, err := a.measurePod(snap, pod); err == nil && len(usage) > 0 {
				var total procstat.Usage
				for _, u := range usage {
					cs := statsapi.ContainerStats{Name: u.name, StartTime: metav1.NewTime(u.started)}
					cs.CPU, cs.Memory = cpuMemory(now, u.Usage)
					ps.Containers = append(ps.Containers, cs)
					total.CPUSeconds += u.CPUSeconds
					total.MemoryBytes += u.MemoryBytes
				}
				ps.CPU, ps.Memory = cpuMemory(now, total)
			}
		}
		ps.VolumeStats = a.volumeStats(now, pod)
		sum.Pods = append(sum.Pods, ps)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(sum); err != nil {
		slog.Debug("write /stats/summary", "err", err)
	}
}

// volumeStats measures the pod's emptyDir and claim volumes that are set
// up.
func (a *Agent) volumeStats(now metav1.Time, pod *corev1.Pod) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var dir string
		var ref *statsapi.PVCReference
		switch {
		case v.EmptyDir != nil:
			dir = a.volumeDir(pod.UID, pluginEmptyDir, v.Name)
		case v.PersistentVolumeClaim != nil:
			path, _, err := a.claimPath(pod, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				continue
			}
			dir = path
			ref = &statsapi.PVCReference{Name: v.PersistentVolumeClaim.ClaimName, Namespace: pod.Namespace}
		default:
			continue
		}
		s, err := fsstats.Measure(dir)
		if err != nil {
			continue
		}
		out = append(out, statsapi.VolumeStats{Name: v.Name, PVCRef: ref, FsStats: statsapi.FsStats{
			Time:           now,
			CapacityBytes:  &s.CapacityBytes,
			AvailableBytes: &s.AvailableBytes,
			UsedBytes:      &s.UsedBytes,
			Inodes:         &s.Inodes,
			InodesFree:     &s.InodesFree,
			InodesUsed:     &s.InodesUsed,
		}})
	}
	return out
}

// cpuMemory are a usage's CPU and memory stats.
func cpuMemory(now metav1.Time, u procstat.Usage) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	cpu := uint64(u.CPUSeconds * 1e9)
	mem := u.MemoryBytes
	return &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &cpu},
		&statsapi.MemoryStats{Time: now, WorkingSetBytes: &mem, UsageBytes: &mem}
}

// bootTime is when the machine started, /proc/stat's btime.
func bootTime() metav1.Time {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return metav1.Time{}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("btime ")); ok {
			if secs, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				return metav1.NewTime(time.Unix(secs, 0))
			}
		}
	}
	return metav1.Time{}
}
