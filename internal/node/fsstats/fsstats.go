// Package fsstats measures a volume's directory as the kubelet's volume
// metrics do for the volumes it reports in /stats/summary: the capacity,
// available space and inodes of the filesystem that holds the directory
// (statfs, upstream's MetricsStatFS), and the space and inodes the
// directory's own tree uses (a walk counting allocated blocks, as du
// does, upstream's MetricsDu).
package fsstats

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stats are one directory's numbers, in bytes and inodes.
type Stats struct {
	CapacityBytes, AvailableBytes, UsedBytes uint64
	Inodes, InodesFree, InodesUsed           uint64
}

// Measure measures dir.
func Measure(dir string) (Stats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Stats{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bsize := uint64(st.Bsize)
	s := Stats{
		CapacityBytes:  st.Blocks * bsize,
		AvailableBytes: st.Bavail * bsize,
		Inodes:         st.Files,
		InodesFree:     st.Ffree,
	}
	// Hard links count once, as du counts them.
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sys, ok := info.Sys().(*syscall.Stat_t)
		if !ok || seen[sys.Ino] {
			return nil
		}
		seen[sys.Ino] = true
		s.InodesUsed++
		s.UsedBytes += uint64(sys.Blocks) * 512
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("measure the usage of %s: %w", dir, err)
	}
	return s, nil
}
