package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// consoleBlock is one ```console example: commands after "$ " and the
// output expected after each.
type consoleStep struct {
	cmd  string
	want []string
}

func consoleSteps(page string) []consoleStep {
	var steps []consoleStep
	in := false
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```console":
			in = true
		case in && line == "```":
			in = false
		case in && strings.HasPrefix(line, "$ "):
			steps = append(steps, consoleStep{cmd: strings.TrimPrefix(line, "$ ")})
		case in && len(steps) > 0 && line != "":
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	return steps
}

// age matches an AGE cell, which differs from run to run.
var age = regexp.MustCompile(`\b\d+(s|m|h|d)\b`)

func normalize(lines []string) string {
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, strings.Join(strings.Fields(age.ReplaceAllString(l, "AGE")), " "))
	}
	return strings.Join(out, "\n")
}

// The markers of pages whose examples run pods. "node": the page's
// cluster has a node agent in a network namespace of the test's own.
// "machine ARGS": the page runs `svcnet up ARGS` on a fresh machine (see
// machine), and its commands run there as a user of that machine would
// run them, with KUBECONFIG=/var/lib/svcnet/kubeconfig.
// The other pages' commands run on a cluster of the test's, where a path
// under the default data dir names the same file under its data dir.
var docsMarker = regexp.MustCompile(`<!-- docs test: (node|machine)([^>]*)-->`)

// defaultDataDir is root's data dir, which the pages name.
const defaultDataDir = "/var/lib/svcnet"

// TestDocsExamples runs every console example in docs/ and the README
// against a fresh cluster and compares the output.
func TestDocsExamples(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	pages = append(pages, "../../README.md")
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		steps := consoleSteps(string(text))
		if len(steps) == 0 {
			continue
		}
		t.Run(filepath.Base(page), func(t *testing.T) {
			t.Parallel() // each page has a cluster of its own
			var c *cluster
			var m *machine
			switch marker := docsMarker.FindStringSubmatch(string(text)); {
			case marker == nil:
				c = startCluster(t)
			case marker[1] == "node":
				c = startNodeCluster(t, strings.Fields(marker[2])...).cluster
			default:
				m = newMachine(t)
				c = startOnMachine(t, m, strings.Fields(marker[2])...).cluster
			}
			bin := t.TempDir()
			// kubectl in the examples runs with this cluster's cache dir.
			wrapper := "#!/bin/sh\nexec " + kubectlPath + " --cache-dir " + c.cacheDir + " \"$@\"\n"
			if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(wrapper), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				if strings.HasPrefix(st.cmd, "etcdctl ") {
					if _, err := exec.LookPath("etcdctl"); err != nil {
						if os.Getenv("CI") != "" {
							t.Fatalf("etcdctl is not installed (.ci/run installs etcd-client)")
						}
						t.Logf("skipping %q: etcdctl not installed", st.cmd)
						continue
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				command := st.cmd
				if m == nil {
					command = strings.ReplaceAll(command, defaultDataDir+"/", c.dataDir+"/")
				}
				cmd := exec.CommandContext(ctx, "sh", "-c", command)
				kubeconfig := c.kubeconfig()
				if m != nil {
					cmd = exec.CommandContext(ctx, "ip", "netns", "exec", m.name, "sh", "-c", `mount --bind "$1" /var/lib && exec sh -c "$2"`, "sh", m.varLib, st.cmd)
					kubeconfig = defaultDataDir + "/kubeconfig"
				}
				cmd.Dir = "../.." // files such as docs/examples/ are named from the checkout's root
				cmd.Env = append(os.Environ(), "PATH="+bin+":"+filepath.Dir(binary)+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig,
					"HOME="+c.cacheDir, "ETCDCTL_API=3", "ETCDCTL_ENDPOINTS="+c.etcdClient)
				out, _ := cmd.CombinedOutput()
				cancel()
				if got, want := normalize(strings.Split(string(out), "\n")), normalize(st.want); got != want {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", filepath.Base(page), st.cmd, got, want)
				}
			}
		})
	}
}
