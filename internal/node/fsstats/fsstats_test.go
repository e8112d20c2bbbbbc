package fsstats

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMeasure counts a tree's files and their blocks, within the
// filesystem's numbers.
func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "data"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "sub", "data"), filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	s, err := Measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.InodesUsed != 3 {
		t.Errorf("inodes used %d, want 3 (two directories, one file linked twice)", s.InodesUsed)
	}
	if s.UsedBytes < 1<<20 || s.UsedBytes > 2<<20 {
		t.Errorf("used %d bytes for a file of 1MiB", s.UsedBytes)
	}
	if s.CapacityBytes == 0 || s.AvailableBytes > s.CapacityBytes || s.Inodes == 0 || s.InodesFree > s.Inodes {
		t.Errorf("filesystem numbers %+v", s)
	}
}
