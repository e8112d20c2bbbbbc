// Package allocator hands out Service cluster IPs and node ports, as
// upstream's pkg/registry/core/service/{ipallocator,portallocator} do. A
// range (a CIDR or a port range) numbers its usable values 0..size-1; a
// Bitmap records which are taken. Dynamic picks prefer the upper band of a
// range so that values users choose themselves from the lower, "static"
// band rarely collide (KEPs 3070 and 3668).
//
// Cluster IPs are IPAddress objects, one per address (see Addresses); node
// ports are a bitmap persisted in etcd as a RangeAllocation object (see
// Store). Either way every change is committed in the same etcd
// transaction as the Service write that caused it, so what is stored as
// taken always equals what stored Services hold.
package allocator

import (
	"fmt"
	"math/big"
	"math/bits"
	"math/rand/v2"
)

// Bitmap is the allocation state of size values, with the first offset
// values forming the static band.
type Bitmap struct {
	size, offset int
	count        int
	bits         *big.Int
}

// NewBitmap returns an empty bitmap of size values.
func NewBitmap(size, offset int) *Bitmap {
	return &Bitmap{size: size, offset: offset, bits: new(big.Int)}
}

// Size is the number of values the bitmap covers.
func (b *Bitmap) Size() int { return b.size }

// Free is the number of values not taken.
func (b *Bitmap) Free() int { return b.size - b.count }

// Has reports whether value i is taken.
func (b *Bitmap) Has(i int) bool {
	return i >= 0 && i < b.size && b.bits.Bit(i) == 1
}

// Allocate takes value i; it returns false when i was already taken.
func (b *Bitmap) Allocate(i int) bool {
	if b.Has(i) {
		return false
	}
	b.bits.SetBit(b.bits, i, 1)
	b.count++
	return true
}

// AllocateNext takes a free value: a random scan of the upper (dynamic)
// band first, then of the static band. It returns false when both are full.
func (b *Bitmap) AllocateNext() (int, bool) {
	i, ok := b.NextFree(nil)
	if ok {
		b.Allocate(i)
	}
	return i, ok
}

// NextFree chooses the value AllocateNext would take, without taking it;
// skip, when set, rules out more values.
func (b *Bitmap) NextFree(skip func(i int) bool) (int, bool) {
	if b.count >= b.size {
		return 0, false
	}
	if i, ok := b.scan(b.offset, b.size, skip); ok {
		return i, true
	}
	return b.scan(0, b.offset, skip)
}

// scan finds the first free value of [lo, hi) from a random start,
// wrapping around inside the band.
func (b *Bitmap) scan(lo, hi int, skip func(int) bool) (int, bool) {
	n := hi - lo
	if n <= 0 {
		return 0, false
	}
	start := rand.IntN(n)
	for k := 0; k < n; k++ {
		i := lo + (start+k)%n
		if b.bits.Bit(i) == 0 && (skip == nil || !skip(i)) {
			return i, true
		}
	}
	return 0, false
}

// Release frees value i; releasing a free value does nothing.
func (b *Bitmap) Release(i int) {
	if !b.Has(i) {
		return
	}
	b.bits.SetBit(b.bits, i, 0)
	b.count--
}

// ForEach calls fn for every taken value in increasing order.
func (b *Bitmap) ForEach(fn func(i int)) {
	for i := 0; i < b.bits.BitLen(); i++ {
		if b.bits.Bit(i) == 1 {
			fn(i)
		}
	}
}

// Bytes is the bitmap in upstream's snapshot form: the big-endian bytes of
// an integer whose bit i is value i.
func (b *Bitmap) Bytes() []byte { return b.bits.Bytes() }

// SetBytes replaces the state with a snapshot taken by Bytes.
func (b *Bitmap) SetBytes(data []byte) error {
	v := new(big.Int).SetBytes(data)
	if v.BitLen() > b.size {
		return fmt.Errorf("snapshot has value %d set beyond the range size %d", v.BitLen()-1, b.size)
	}
	count := 0
	for _, w := range v.Bits() {
		count += bits.OnesCount(uint(w))
	}
	b.bits, b.count = v, count
	return nil
}

func (b *Bitmap) clone() *Bitmap {
	return &Bitmap{size: b.size, offset: b.offset, count: b.count, bits: new(big.Int).Set(b.bits)}
}
