package allocator

import "testing"

func TestBitmapPrefersUpperBand(t *testing.T) {
	b := NewBitmap(100, 20)
	for k := 0; k < 80; k++ {
		i, ok := b.AllocateNext()
		if !ok || i < 20 {
			t.Fatalf("pick %d: got %d, %v; want a free value of the upper band", k, i, ok)
		}
	}
	for k := 0; k < 20; k++ {
		if i, ok := b.AllocateNext(); !ok || i >= 20 {
			t.Fatalf("upper band full: got %d, %v; want the static band", i, ok)
		}
	}
	if _, ok := b.AllocateNext(); ok || b.Free() != 0 {
		t.Fatalf("full bitmap allocated (free %d)", b.Free())
	}
	b.Release(42)
	if i, ok := b.AllocateNext(); !ok || i != 42 {
		t.Fatalf("after releasing 42 got %d, %v", i, ok)
	}
}

func TestBitmapAllocateRelease(t *testing.T) {
	b := NewBitmap(10, 0)
	if !b.Allocate(3) || b.Allocate(3) || !b.Has(3) || b.Free() != 9 {
		t.Fatal("allocate 3 twice")
	}
	b.Release(3)
	b.Release(3)
	if b.Has(3) || b.Free() != 10 {
		t.Fatal("release 3 twice")
	}
	if b.Has(-1) || b.Has(10) {
		t.Fatal("values outside the bitmap are never taken")
	}
}

func TestBitmapSnapshot(t *testing.T) {
	b := NewBitmap(1000, 16)
	for _, i := range []int{0, 7, 8, 999} {
		b.Allocate(i)
	}
	c := NewBitmap(1000, 16)
	if err := c.SetBytes(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	var got []int
	c.ForEach(func(i int) { got = append(got, i) })
	if len(got) != 4 || got[0] != 0 || got[3] != 999 || c.Free() != 996 {
		t.Fatalf("restored %v (free %d)", got, c.Free())
	}
	// Upstream's snapshot format: big-endian, bit i is value i.
	if d := NewBitmap(16, 0); d.Allocate(0) && d.Allocate(9) && string(d.Bytes()) != "\x02\x01" {
		t.Fatalf("bytes = %x, want 0201", d.Bytes())
	}
	if err := NewBitmap(10, 0).SetBytes(b.Bytes()); err == nil {
		t.Fatal("a snapshot larger than the range was accepted")
	}
}
