package node

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

func TestDiskPressureThresholds(t *testing.T) {
	var fs unix.Statfs_t
	d := newDiskPressure("/data", time.Minute)
	d.statfs = func(path string, st *unix.Statfs_t) error {
		if path != "/data" {
			t.Errorf("statfs of %s", path)
		}
		*st = fs
		return nil
	}
	start := time.Now()
	for _, tt := range []struct {
		name                        string
		blocks, avail, files, ffree uint64
		at                          time.Duration
		want                        bool
	}{
		{"plenty", 1000, 500, 1000, 500, 0, false},
		{"15% available is enough", 1000, 150, 1000, 500, 0, false},
		{"below 15% available", 1000, 149, 1000, 500, time.Second, true},
		{"below 5% inodes free", 1000, 500, 1000, 49, 2 * time.Second, true},
		{"freed, within the transition period", 1000, 500, 1000, 500, time.Minute, true},
		{"freed, after the transition period", 1000, 500, 1000, 500, time.Minute + 2*time.Second, false},
	} {
		fs = unix.Statfs_t{Blocks: tt.blocks, Bavail: tt.avail, Files: tt.files, Ffree: tt.ffree, Bsize: 4096}
		if got, signal := d.observe(start.Add(tt.at)); got != tt.want {
			t.Errorf("%s: pressure %v (%s), want %v", tt.name, got, signal, tt.want)
		}
	}
}

func TestConditionEvents(t *testing.T) {
	cond := func(ty corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ty, Status: s}
	}
	first := corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse), cond(corev1.NodeDiskPressure, corev1.ConditionFalse),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse), cond(corev1.NodeReady, corev1.ConditionFalse),
	}}
	if got := changedConditions(nil, first); len(got) != 4 || got[0] != "NodeHasSufficientMemory" || got[1] != "NodeHasNoDiskPressure" ||
		got[2] != "NodeHasSufficientPID" || got[3] != "NodeNotReady" {
		t.Errorf("first status: %v", got)
	}
	next := *first.DeepCopy()
	next.Conditions[1].Status, next.Conditions[3].Status = corev1.ConditionTrue, corev1.ConditionTrue
	if got := changedConditions(&first, next); len(got) != 2 || got[0] != "NodeHasDiskPressure" || got[1] != "NodeReady" {
		t.Errorf("pressure and ready: %v", got)
	}
	if got := changedConditions(&next, next); len(got) != 0 {
		t.Errorf("unchanged: %v", got)
	}
}
