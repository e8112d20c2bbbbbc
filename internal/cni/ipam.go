package cni

import (
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ipam hands out the addresses of one pod CIDR. Each allocation is a file
// named by the address holding the owner's id, created with O_EXCL: the file
// system makes an address impossible to hand out twice, and the record
// survives a crash of the agent. Owners no longer known are released by
// Network.GC. Addresses are handed out round-robin from the last one
// reserved, so that a freed address is not reused at once while others may
// still point at it.
type ipam struct {
	dir  string
	cidr *net.IPNet
	gw   net.IP
}

const lastReservedFile = "last_reserved"

// allocate returns owner's address, reserving the next free one if owner
// has none.
func (a *ipam) allocate(owner string) (net.IP, error) {
	if ip, err := a.lookup(owner); err != nil || ip != nil {
		return ip, err
	}
	first, size := a.span()
	start := 0
	if b, err := os.ReadFile(filepath.Join(a.dir, lastReservedFile)); err == nil {
		if last := net.ParseIP(strings.TrimSpace(string(b))).To4(); last != nil && a.cidr.Contains(last) {
			start = indexOf(first, last) + 1
		}
	}
	for i := range size {
		ip := offset(first, (start+i)%size)
		if !a.usable(ip) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(a.dir, ip.String()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reserve %s: %w", ip, err)
		}
		_, werr := f.WriteString(owner)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(f.Name())
			return nil, fmt.Errorf("record owner of %s: %w", ip, werr)
		}
		if err := os.WriteFile(filepath.Join(a.dir, lastReservedFile), []byte(ip.String()), 0o600); err != nil {
			return nil, fmt.Errorf("record last reserved address: %w", err)
		}
		return ip, nil
	}
	return nil, fmt.Errorf("no free address left in %s", a.cidr)
}

// span is the first host address and the number of host addresses, the
// network, gateway and broadcast addresses excluded.
func (a *ipam) span() (net.IP, int) {
	ones, bits := a.cidr.Mask.Size()
	total := new(big.Int).Lsh(big.NewInt(1), uint(bits-ones)).Int64()
	return offset(a.cidr.IP.To4(), 1), int(total) - 2
}

// usable reports whether ip may be handed to a pod.
func (a *ipam) usable(ip net.IP) bool {
	if !a.cidr.Contains(ip) || ip.Equal(a.gw) || ip.Equal(a.cidr.IP) {
		return false
	}
	bcast := make(net.IP, 4)
	for i := range bcast {
		bcast[i] = a.cidr.IP.To4()[i] | ^a.cidr.Mask[i]
	}
	return !ip.Equal(bcast)
}

// lookup returns owner's address, or nil.
func (a *ipam) lookup(owner string) (net.IP, error) {
	all, err := a.allocations()
	if err != nil {
		return nil, err
	}
	for ip, o := range all {
		if o == owner {
			return net.ParseIP(ip), nil
		}
	}
	return nil, nil
}

// allocations maps each reserved address to its owner.
func (a *ipam) allocations() (map[string]string, error) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("read allocations: %w", err)
	}
	m := map[string]string{}
	for _, e := range entries {
		if net.ParseIP(e.Name()) == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read allocation %s: %w", e.Name(), err)
		}
		m[e.Name()] = strings.TrimSpace(string(b))
	}
	return m, nil
}

// release frees owner's address, if any.
func (a *ipam) release(owner string) error {
	ip, err := a.lookup(owner)
	if err != nil || ip == nil {
		return err
	}
	if err := os.Remove(filepath.Join(a.dir, ip.String())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release %s: %w", ip, err)
	}
	return nil
}

// offset returns ip + n for an IPv4 address.
func offset(ip net.IP, n int) net.IP {
	v := new(big.Int).SetBytes(ip.To4())
	v.Add(v, big.NewInt(int64(n)))
	b := v.Bytes()
	out := make(net.IP, 4)
	copy(out[4-min(len(b), 4):], b[max(0, len(b)-4):])
	return out
}

// indexOf is the distance from first to ip.
func indexOf(first, ip net.IP) int {
	d := new(big.Int).Sub(new(big.Int).SetBytes(ip.To4()), new(big.Int).SetBytes(first.To4()))
	return int(d.Int64())
}
