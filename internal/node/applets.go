package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// An image played by a multi-call host binary (busybox) has all its
// applets in /bin. The node keeps a directory of links named after the
// applets, each pointing at the binary, and puts it first on the PATH of
// the commands run in such a container, so that `sh` is the image's shell
// and `nslookup` its applet, as in the image.
//
// The images' `sh` is the host's bash (in its POSIX mode, as it is started
// by that name) where there is one, not the host's busybox or dash. The
// shell of busybox and Alpine images, upstream busybox's ash, passes its
// children every environment variable it was given, also those whose names
// are not shell names (`data-1`, from a ConfigMap's keys through envFrom),
// and looks at PATH before its own applets (agnhost's image has netcat's
// nc over busybox's). Debian's busybox drops such variables (a Debian
// patch) and runs its applets first; dash drops them too; bash does
// neither.
//
// Under runc an image played by busybox alone keeps busybox's ash as its
// `sh` (its messages are those upstream's tests read, such as `can't
// create /file: Read-only file system`), and only a container whose
// environment holds a name ash would drop gets bash bound over /bin/sh.
const imageShell = "bash"

// shellMount is the bind mount that gives a runc container of the table's
// entry bash for its /bin/sh (see imageShell), or false when busybox's
// ash serves: an image with host executables has bash there already.
func shellMount(entry Image, env []string) (bindFile, bool) {
	if entry.Host != "busybox" && entry.Applets != "busybox" || len(entry.Executables) > 0 {
		return bindFile{}, false
	}
	if !slices.ContainsFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return !shellName(name)
	}) {
		return bindFile{}, false
	}
	sh, err := exec.LookPath(imageShell)
	if err != nil {
		return bindFile{}, false
	}
	return bindFile{Source: sh, Target: "/bin/sh", ReadOnly: true}, true
}

// shellName reports whether name is a POSIX shell variable name.
func shellName(name string) bool {
	for i, r := range name {
		if r != '_' && !('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z') && (i == 0 || !('0' <= r && r <= '9')) {
			return false
		}
	}
	return name != ""
}

// appletDir returns the directory of host's applet links under the data
// dir, making it on first use.
func appletDir(dataDir, host string) (string, error) {
	bin, err := exec.LookPath(host)
	if err != nil {
		return "", fmt.Errorf("find %s: %w", host, err)
	}
	dir := filepath.Join(dataDir, "images", filepath.Base(bin), "bin")
	err = buildDir(dir, func(tmp string) error {
		names, err := appletNames(bin)
		if err != nil {
			return err
		}
		sh, err := exec.LookPath(imageShell)
		if err != nil {
			sh = bin
		}
		for _, name := range names {
			target := bin
			if name == "sh" {
				target = sh
			}
			if err := os.Symlink(target, filepath.Join(tmp, name)); err != nil {
				return fmt.Errorf("link applet %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return dir, nil
}

// appletNames lists the applets of the multi-call binary bin.
func appletNames(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list the applets of %s: %w", bin, err)
	}
	return slices.DeleteFunc(strings.Fields(string(out)), func(name string) bool { return strings.ContainsRune(name, '/') }), nil
}

// withApplets puts the applet directory of image's host binary, if the
// image table plays image with one, first on env's PATH, or that of its
// Applets binary last.
func withApplets(dataDir string, images ImageTable, image string, env []string) ([]string, error) {
	img, ok := images[imageName(image)]
	host, first := img.Host, true
	if host == "" {
		host, first = img.Applets, false
	}
	if !ok || host == "" {
		return env, nil
	}
	dir, err := appletDir(dataDir, host)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			found = true
			switch {
			case slices.Contains(filepath.SplitList(v), dir):
			case first:
				kv = "PATH=" + dir + ":" + v
			default:
				kv = "PATH=" + v + ":" + dir
			}
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "PATH="+dir)
	}
	return out, nil
}
