package builtin

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mountTesterContent is what mounttest writes to its new files and waits
// for in --file_content_in_loop.
const mountTesterContent = "mount-tester new file\n"

// mounttest is agnhost's mounttest, which upstream's volume tests run:
// with a zero umask it writes the --new_file_* files with their modes and
// prints what each flag asks about a path (file system type, mode,
// permissions, owner, content), in agnhost's words; it fails when any
// step failed.
func mounttest(args []string) error {
	fs := flag.NewFlagSet("mounttest", flag.ContinueOnError)
	fsTypePath := fs.String("fs_type", "", "path to print the fs type for")
	modePath := fs.String("file_mode", "", "path to print the mode bits of")
	permPath := fs.String("file_perm", "", "path to print the perms of")
	ownerPath := fs.String("file_owner", "", "path to print the owning UID and GID of")
	newFiles := map[os.FileMode]*string{}
	for _, perm := range []os.FileMode{0o644, 0o666, 0o660, 0o777} {
		newFiles[perm] = fs.String(fmt.Sprintf("new_file_%04o", perm), "", fmt.Sprintf("path to write to and read from with perm %04o", perm))
	}
	contentPath := fs.String("file_content", "", "path to read the file content from")
	loopPath := fs.String("file_content_in_loop", "", "path to read the file content in loop from")
	retry := fs.Int("retry_time", 180, "retry time during the loop, in seconds")
	breakOnExpected := fs.Bool("break_on_expected_content", true, "break out of the loop on the expected content")
	if err := fs.Parse(args); err != nil {
		return err
	}
	syscall.Umask(0)
	var errs []error
	step := func(path string, f func(string) error) {
		if path != "" {
			errs = append(errs, f(path))
		}
	}
	step(*fsTypePath, func(p string) error {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			fmt.Printf("error from statfs(%q): %v\n", p, err)
			return err
		}
		kind := strconv.FormatInt(st.Type, 10)
		if st.Type == unix.TMPFS_MAGIC {
			kind = "tmpfs"
		}
		fmt.Printf("mount type of %q: %s\n", p, kind)
		return nil
	})
	for _, perm := range []os.FileMode{0o644, 0o666, 0o660, 0o777} {
		step(*newFiles[perm], func(p string) error {
			if err := os.WriteFile(p, []byte(mountTesterContent), perm); err != nil {
				fmt.Printf("error writing new file %q: %v\n", p, err)
				return err
			}
			return printContent(p)
		})
	}
	stat := func(p string, show func(os.FileInfo)) error {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Printf("error from Stat(%q): %v\n", p, err)
			return err
		}
		show(fi)
		return nil
	}
	step(*modePath, func(p string) error {
		return stat(p, func(fi os.FileInfo) { fmt.Printf("mode of file %q: %v\n", p, fi.Mode()) })
	})
	step(*permPath, func(p string) error {
		return stat(p, func(fi os.FileInfo) { fmt.Printf("perms of file %q: %v\n", p, fi.Mode().Perm()) })
	})
	step(*ownerPath, func(p string) error {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			fmt.Printf("error from stat(%q): %v\n", p, err)
			return err
		}
		fmt.Printf("owner UID of %q: %v\n", p, st.Uid)
		fmt.Printf("owner GID of %q: %v\n", p, st.Gid)
		return nil
	})
	step(*contentPath, printContent)
	step(*loopPath, func(p string) error {
		var err error
		for start := time.Now(); time.Since(start) < time.Duration(*retry)*time.Second; time.Sleep(2 * time.Second) {
			var b []byte
			if b, err = os.ReadFile(p); err != nil {
				fmt.Printf("Error reading file %s: %v, retrying\n", p, err)
				continue
			}
			fmt.Printf("content of file %q: %v\n", p, string(b))
			if !*breakOnExpected {
				continue
			}
			if string(b) != mountTesterContent {
				fmt.Printf("Unexpected content. Expected: %s. Retrying\n", mountTesterContent)
				continue
			}
			break
		}
		return err
	})
	return errors.Join(errs...)
}

// printContent prints a file's content as mounttest does.
func printContent(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		fmt.Printf("error reading file content for %q: %v\n", p, err)
		return err
	}
	fmt.Printf("content of file %q: %v\n", p, string(b))
	return nil
}
