package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/svcnet/svcnet/internal/node/builtin"
	"github.com/svcnet/svcnet/internal/node/images"
)

// Under runc, the images of the image table are images too, which the
// node assembles from its own files instead of pulling them: a base layer
// with a root file system's skeleton and busybox with its applets in /bin
// (the image's shell and tools, as in an Alpine image), then the program:
// for a built-in program, the ELF interpreter and libraries of svcnet's
// executable, which is bound read-only into the container at /svcnet; for
// a host executable, that executable and its libraries; and the host
// executables the entry lists, with theirs (and, for an entry with
// Setuid, a setuid-root copy of svcnet's executable, from which its
// program runs); then the entry's own Files, if any. Each is stored as
// localhost/<table name>:svcnet, so that the containers report it and the
// Node lists it.

// selfPath is where the node binds its svcnet executable in the image of
// a built-in program.
const selfPath = "/svcnet"

// localImageTag tags the images the node assembles.
const localImageTag = "svcnet"

// localImageLabel names, in an assembled image's config, the image
// table's entry it plays.
const localImageLabel = "io.svcnet.image"

// builtinReadyEnv hands a built-in program the descriptor on which it
// says it has started: the shim passes it (through runc, too) as the
// first descriptor after the standard streams.
var builtinReadyEnv = builtin.ReadyFDEnv + "=3"

// defaultPath is the PATH of a container whose image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// localImage returns the image assembled for the table's entry name,
// assembling it on first use after the agent's start.
func (a *Agent) localImage(ctx context.Context, name string, entry Image) (*images.Image, error) {
	if img, ok := a.assembled.Load(name); ok {
		return img.(*images.Image), nil
	}
	v, err, _ := a.assembling.Do(name, func() (any, error) {
		img, err := a.assemble(ctx, name, entry)
		if err != nil {
			return nil, fmt.Errorf("assemble the image of %s: %w", name, err)
		}
		a.assembled.Store(name, img)
		return img, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*images.Image), nil
}

// assembledImages are the IDs of the images assembled since the agent
// started, which the image garbage collector keeps.
func (a *Agent) assembledImages() map[string]bool {
	out := map[string]bool{}
	a.assembled.Range(func(_, v any) bool {
		out[v.(*images.Image).ID] = true
		return true
	})
	return out
}

// assemble builds the image of the table's entry name from the node's
// files.
func (a *Agent) assemble(ctx context.Context, name string, entry Image) (*images.Image, error) {
	base := []images.File{
		{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		bb = ""
	} else {
		files, err := busyboxFiles(bb)
		if err != nil {
			return nil, err
		}
		base = append(base, files...)
	}
	if entry.LocalhostCert {
		cert, key, err := builtin.LocalhostCertificate()
		if err != nil {
			return nil, err
		}
		base = append(base, images.File{Path: "/localhost.crt", Data: cert, Mode: 0o644},
			images.File{Path: "/localhost.key", Data: key, Mode: 0o600})
	}
	var program []images.File
	// The image's own paths of built-in programs (agnhost's /agnhost and
	// /coredns) run them as well.
	programs := map[string]string{}
	maps.Copy(programs, entry.Programs)
	for _, b := range entry.Binaries {
		if entry.Builtin != "" && strings.HasPrefix(b, "/") {
			programs[b] = entry.Builtin
		}
	}
	if entry.Builtin != "" || len(programs) > 0 {
		if program, err = images.ExecutableFiles(a.cfg.Self); err != nil {
			return nil, err
		}
		// The mount point of the executable.
		program = append(program, images.File{Path: selfPath, Mode: 0o755})
		for _, p := range slices.Sorted(maps.Keys(programs)) {
			if p == entry.Setuid {
				continue
			}
			script := fmt.Sprintf("#!/bin/sh\nexec %s node image %s --ports= -- \"$0\" \"$@\"\n", selfPath, programs[p])
			program = append(program, images.File{Path: p, Data: []byte(script), Mode: 0o755})
		}
		if entry.Setuid != "" {
			program = append(program, images.File{Path: entry.Setuid, Source: a.cfg.Self, Mode: 0o755 | fs.ModeSetuid})
		}
	}
	if entry.Builtin == "" && entry.Host != "" {
		exe, files, err := hostExecutable(entry.Host)
		if err != nil {
			return nil, fmt.Errorf("the host's %s: %w", entry.Host, err)
		}
		if exe != bb {
			program = append(program, files...)
		}
	}
	if bb != "" {
		sh, files, err := hostExecutable(imageShell)
		switch {
		case err == nil && len(entry.Executables) > 0:
			program = append(program, files...)
			program = append(program, images.File{Path: "/bin/sh", Link: sh})
		case err == nil:
			// busybox's ash, a file of its own that a container whose
			// variables ash would drop gets bash bound over (shellMount).
			program = append(program, files...)
			program = append(program, images.File{Path: "/bin/sh", Source: bb})
		case !errors.Is(err, exec.ErrNotFound):
			return nil, err
		}
	}
	for _, prog := range entry.Executables {
		_, files, err := hostExecutable(prog)
		if errors.Is(err, exec.ErrNotFound) {
			slog.Info("node: the host lacks an executable of the image", "image", name, "executable", prog)
			continue
		}
		if err != nil {
			return nil, err
		}
		program = append(program, files...)
	}
	// The label tells apart images of equal files (the built-in programs).
	cfg := v1.Config{Env: []string{"PATH=" + defaultPath}, Entrypoint: entry.Entrypoint, Cmd: entry.Cmd,
		Labels: map[string]string{localImageLabel: name}}
	layers := [][]images.File{base, program}
	if own := imageFileLayer(entry); own != nil {
		layers = append(layers, own)
	}
	return a.images.Assemble(ctx, "localhost/"+strings.ToLower(name), localImageTag, cfg, layers...)
}

// hostExecutable finds the host executable name on PATH: its absolute
// path, and the files that put it in an image at that path with what it
// needs to run.
func hostExecutable(name string) (string, []images.File, error) {
	exe, err := exec.LookPath(name)
	if err != nil {
		return "", nil, err
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return "", nil, err
	}
	files, err := images.ExecutableFiles(exe)
	if err != nil {
		return "", nil, err
	}
	return exe, append(files, images.File{Path: exe, Source: exe}), nil
}

// busyboxFiles are the host's busybox at /bin/busybox, what it needs to
// run, and a link in /bin for each of its applets.
func busyboxFiles(bb string) ([]images.File, error) {
	files, err := images.ExecutableFiles(bb)
	if err != nil {
		return nil, err
	}
	files = append(files, images.File{Path: "/bin/busybox", Source: bb})
	applets, err := appletNames(bb)
	if err != nil {
		return nil, err
	}
	for _, name := range applets {
		if name != "busybox" {
			files = append(files, images.File{Path: "/bin/" + name, Link: "busybox"})
		}
	}
	return files, nil
}
