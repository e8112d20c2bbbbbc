package oci

import "testing"

func TestResolveUser(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\nnginx:x:101:102:nginx:/nonexistent:/bin/false\napp:x:1000:1000::/home/app:/bin/sh\n")
	group := []byte("root:x:0:\nnginx:x:102:\nstaff:x:50:\n")
	for _, tc := range []struct {
		user     string
		uid, gid uint32
		fails    bool
	}{
		{user: "", uid: 0, gid: 0},
		{user: "nginx", uid: 101, gid: 102},
		{user: "1000", uid: 1000, gid: 1000},
		{user: "4242", uid: 4242, gid: 0},
		{user: "app:staff", uid: 1000, gid: 50},
		{user: "nginx:7", uid: 101, gid: 7},
		{user: "4242:4343", uid: 4242, gid: 4343},
		{user: "nobody", fails: true},
		{user: "app:nogroup", fails: true},
	} {
		uid, gid, err := ResolveUser(tc.user, passwd, group)
		if tc.fails != (err != nil) || !tc.fails && (uid != tc.uid || gid != tc.gid) {
			t.Errorf("%q: %d:%d %v, want %d:%d (fails %v)", tc.user, uid, gid, err, tc.uid, tc.gid, tc.fails)
		}
	}
	if uid, gid, err := ResolveUser("1000", nil, nil); err != nil || uid != 1000 || gid != 0 {
		t.Errorf("a uid in an image without passwd: %d:%d %v", uid, gid, err)
	}
}
