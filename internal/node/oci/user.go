package oci

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ResolveUser turns an image's or a container's user ("", uid, name,
// uid:gid, name:group) into ids as containerd does: names are looked up
// in the image's /etc/passwd and /etc/group (passwd and group, nil when
// the image has none); a user without a group takes its passwd entry's,
// or 0.
func ResolveUser(user string, passwd, group []byte) (uid, gid uint32, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	entry, found := lookup(passwd, u)
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		uid = uint32(n)
		if e, ok := lookupID(passwd, u); ok {
			entry, found = e, true
		}
	} else if !found {
		return 0, 0, fmt.Errorf("unable to find user %s: no matching entries in passwd file", u)
	} else if uid, err = id(entry[2]); err != nil {
		return 0, 0, err
	}
	if !hasGroup {
		if found {
			gid, err = id(entry[3])
		}
		return uid, gid, err
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		return uid, uint32(n), nil
	}
	ge, ok := lookup(group, g)
	if !ok {
		return 0, 0, fmt.Errorf("unable to find group %s: no matching entries in group file", g)
	}
	gid, err = id(ge[2])
	return uid, gid, err
}

func id(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("bad id %q in the image's passwd or group file", s)
	}
	return uint32(n), nil
}

// lookup finds the colon-separated entry named name (field 0).
func lookup(file []byte, name string) ([]string, bool) {
	return find(file, func(f []string) bool { return f[0] == name })
}

// lookupID finds the passwd entry of uid (field 2).
func lookupID(file []byte, uid string) ([]string, bool) {
	return find(file, func(f []string) bool { return f[2] == uid })
}

func find(file []byte, match func([]string) bool) ([]string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 4 && match(f) {
			return f, true
		}
	}
	return nil, false
}
