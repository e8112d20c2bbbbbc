package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/node/images/imagetest"
)

// TestRuncImages: with --runtime runc, a Deployment of an image from a
// registry (go-containerregistry's, on loopback) runs isolated: its
// containers see the image's root, not the host's, write to layers of
// their own, run as the user asked; the image table's images run isolated
// in images the node assembles; an absent image with pull policy Never and
// a missing tag wait with the kubelet's reasons.
func TestRuncImages(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("runc"); err != nil || !imagetest.StaticBusybox() {
		if os.Getenv("CI") != "" {
			t.Fatal("CI installs runc and busybox-static (.ci/run)")
		}
		t.Skip("needs runc and busybox-static")
	}
	host, stop := imagetest.Registry("", "")
	defer stop()
	image := host + "/e2e/busybox:1"
	if err := imagetest.PushBusybox(image); err != nil {
		t.Fatal(err)
	}

	// Registered first, run last: after the cluster has stopped its pods
	// and removed their cgroups (their parent is shared with the nodes of
	// tests running meanwhile).
	var cgroups []string
	t.Cleanup(func() {
		var left []string
		for _, p := range cgroups {
			dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", p))
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", p)); err == nil {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", p))
			}
			left = append(left, dirs...)
		}
		if len(left) > 0 {
			t.Errorf("cgroups left after the cluster stopped: %v", left)
			for _, d := range left {
				_ = os.Remove(d)
			}
		}
	})
	// Image garbage collection at any usage, for images unused for no time.
	c := startNodeCluster(t, "--runtime", "runc", "--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0",
		"--minimum-image-ttl-duration", "0s", "--image-gc-period", "1s")
	defer func() { cgroups = containerCgroups(t, c.dataDir) }()
	hostFile := fmt.Sprintf("/tmp/svcnet-e2e-runc-%d", os.Getpid())
	c.withStdin(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: isolated}
spec:
  replicas: 2
  selector: {matchLabels: {app: isolated}}
  template:
    metadata: {labels: {app: isolated}}
    spec:
      nodeName: %s
      terminationGracePeriodSeconds: 2
      securityContext: {runAsUser: 1000}
      containers:
      - name: main
        image: %s
        command: [sh, -c]
        args: ['ls /; echo uid=$(id -u); cat %[3]s 2>/dev/null || echo no-file; echo $HOSTNAME > %[3]s; echo wrote=$(cat %[3]s); exec sleep 3600']
`, nodeName, image, hostFile), "apply", "-f", "-")

	var pods []string
	eventually(t, 90*time.Second, func() string {
		out, _ := c.kubectl("", "get", "pods", "-l", "app=isolated", "-o", `jsonpath={range .items[?(@.status.phase=="Running")]}{.metadata.name} {end}`)
		if pods = strings.Fields(out); len(pods) != 2 {
			return fmt.Sprintf("running pods %q; pods: %s; events: %s", out, c.must("get", "pods", "-o", "wide"), c.must("get", "events"))
		}
		return ""
	})
	for _, p := range pods {
		var logs string
		eventually(t, 30*time.Second, func() string {
			logs, _ = c.kubectl("", "logs", p)
			if !strings.Contains(logs, "wrote=") {
				return "logs of " + p + ": " + logs
			}
			return ""
		})
		lines := strings.Fields(logs)
		for _, want := range []string{imagetest.Marker, "uid=1000", "no-file", "wrote=" + p} {
			if !strings.Contains(" "+strings.Join(lines, " ")+" ", " "+want+" ") {
				t.Errorf("pod %s: output lacks %q (the image's root, its user, its own writable layer):\n%s", p, want, logs)
			}
		}
		if strings.Contains(logs, "usr") || strings.Contains(logs, "home") {
			t.Errorf("pod %s sees the host's root:\n%s", p, logs)
		}
		if id := c.jsonpath("pod", p, "{.status.containerStatuses[0].imageID}"); !strings.HasPrefix(id, host+"/e2e/busybox@sha256:") {
			t.Errorf("pod %s: imageID %q, want the repo digest", p, id)
		}
	}
	// The Node lists the image, by repo digest and tag, with its size.
	eventually(t, 30*time.Second, func() string {
		names := c.jsonpath("node", nodeName, "{.status.images[*].names}")
		if !strings.Contains(names, host+"/e2e/busybox@sha256:") || !strings.Contains(names, image) {
			return "node images: " + names
		}
		return ""
	})

	// kubectl exec runs in the container (runc exec), as its user.
	if out := c.must("exec", pods[0], "--", "ls", "/"); !strings.Contains(out, imagetest.Marker) || strings.Contains(out, "usr") {
		t.Errorf("kubectl exec ls / lists %q, want the image's root", out)
	}
	if out := c.must("exec", pods[0], "--", "id", "-u"); strings.TrimSpace(out) != "1000" {
		t.Errorf("kubectl exec id -u: %q, want 1000", out)
	}
	if _, err := os.Stat(hostFile); err == nil {
		os.Remove(hostFile)
		t.Errorf("a container's write to %s reached the host", hostFile)
	}
	events := c.must("get", "events", "--field-selector", "involvedObject.name="+pods[0])
	if !strings.Contains(events, `Pulling image "`+image+`"`) && !strings.Contains(events, `already present on machine`) {
		t.Errorf("no pull events for %s:\n%s", pods[0], events)
	}

	// The image table's images run isolated too, in images the node
	// assembles (busybox's applets; svcnet's built-in programs): the seed
	// lab's nginx Deployment behind a Service, fetched by its DNS name
	// (CoreDNS runs so as well) from a busybox client.
	seedLab(t, c)
	// The client sees busybox's root, not the host's: no /etc/os-release.
	if out, err := c.kubectl("", "exec", "client", "--", "ls", "/bin/wget", "/etc/os-release"); err == nil || !strings.Contains(out, "/bin/wget") || strings.Contains(out, "\n/etc/os-release") {
		t.Errorf("kubectl exec client ls: %v %q, want /bin/wget and no /etc/os-release", err, out)
	}
	// Upstream's e2e framework checks a Service from an agnhost pod with
	// netcat-openbsd's flags, which busybox's nc refuses: in agnhost's
	// assembled image the host's tools come before busybox's applets,
	// also in its shell.
	c.pod("execpod", "registry.k8s.io/e2e-test-images/agnhost:2.53", "")
	eventually(t, 60*time.Second, func() string {
		out, err := c.kubectl("", "exec", "execpod", "--", "/bin/sh", "-x", "-c", "echo hostName | nc -v -t -w 2 web 80")
		if err != nil || !strings.Contains(out, "succeeded") {
			return fmt.Sprintf("nc -v -t -w 2 web 80 from agnhost: %v %q", err, out)
		}
		return ""
	})
	// ... and runs the image's /agnhost from a shell, as the framework
	// does for agnhost connect.
	if out, err := c.kubectl("", "exec", "execpod", "--", "/bin/sh", "-x", "-c", "/agnhost connect --timeout=3s web:80 && /agnhost connect --timeout=3s 127.0.0.1:1"); err == nil || !strings.Contains(out, "REFUSED") {
		t.Errorf("/agnhost connect from agnhost's shell: %v %q, want web:80 connected and 127.0.0.1:1 REFUSED", err, out)
	}
	// Upstream's DNS tests: agnhost dns-suffix prints the pod's search
	// list; glibc's getent (agnhost's image) and dig (glibc-dns-testing's,
	// Debian's dnsutils) resolve a Service by its short name.
	if out, err := c.kubectl("", "exec", "execpod", "--", "/agnhost", "dns-suffix"); err != nil || !strings.HasPrefix(out, "default.svc.cluster.local,svc.cluster.local,cluster.local") {
		t.Errorf("/agnhost dns-suffix: %v %q", err, out)
	}
	// Upstream's StatefulSet tests fail a test-webserver pod's readiness
	// by moving the image's /localhost.crt away, and mend it by moving
	// it back.
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: webserver}
spec:
  nodeName: `+nodeName+`
  containers:
  - name: main
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [test-webserver]
    readinessProbe: {httpGet: {path: /localhost.crt, port: 80}, periodSeconds: 1, failureThreshold: 1}
`, "apply", "-f", "-")
	c.waitReady("webserver", "True", 60*time.Second)
	c.must("exec", "webserver", "--", "/bin/sh", "-c", "mv -v /localhost.crt /tmp/")
	c.waitReady("webserver", "False", 30*time.Second)
	c.must("exec", "webserver", "--", "/bin/sh", "-c", "mv -v /tmp/localhost.crt /")
	c.waitReady("webserver", "True", 30*time.Second)
	// Upstream's EmptyDir tests: agnhost mounttest in the container
	// reports a memory-backed emptyDir as tmpfs and writes its file with
	// the mode asked for.
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: mounttest}
spec:
  nodeName: `+nodeName+`
  restartPolicy: Never
  volumes: [{name: v, emptyDir: {medium: Memory}}]
  containers:
  - name: main
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [mounttest, --fs_type=/v, --new_file_0644=/v/f, --file_perm=/v/f]
    volumeMounts: [{name: v, mountPath: /v}]
`, "apply", "-f", "-")
	c.waitPhase("pod", "mounttest", "Succeeded", 60*time.Second)
	// A pod's sysctls are set in its containers (upstream's Sysctls
	// conformance test), with a slash-separated name too.
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: sysctl}
spec:
  nodeName: `+nodeName+`
  restartPolicy: Never
  securityContext:
    sysctls: [{name: kernel/shm_rmid_forced, value: "1"}]
  containers:
  - name: main
    image: busybox
    command: [sysctl, kernel.shm_rmid_forced]
---
apiVersion: v1
kind: Pod
metadata: {name: privileged}
spec:
  nodeName: `+nodeName+`
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["true"]
    securityContext: {privileged: true}
`, "apply", "-f", "-")
	// A privileged container gets every capability the node has (where
	// the machine lacks one, asking runc for it would fail the start).
	c.waitPhase("pod", "privileged", "Succeeded", 60*time.Second)
	c.waitPhase("pod", "sysctl", "Succeeded", 60*time.Second)
	if out := c.must("logs", "sysctl"); !strings.Contains(out, "kernel.shm_rmid_forced = 1") {
		t.Errorf("sysctl kernel.shm_rmid_forced printed %q, want 1", out)
	}
	if out := c.must("logs", "mounttest"); !strings.Contains(out, `mount type of "/v": tmpfs`) || !strings.Contains(out, `perms of file "/v/f": -rw-r--r--`) {
		t.Errorf("agnhost mounttest printed %q", out)
	}
	c.pod("glibc", "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1", "    command: [sleep, '3600']\n")
	// ... and agnhost's /coredns serves a Corefile of a hosts plugin
	// alone, as upstream's "configurable pod resolv.conf" test runs it.
	c.withStdin(`apiVersion: v1
kind: ConfigMap
metadata: {name: corefile}
data:
  Corefile: |
    . {
      hosts {
        1.1.1.1 notexistname.resolv.conf.local
      }
      log
    }
---
apiVersion: v1
kind: Pod
metadata: {name: hostsdns}
spec:
  nodeName: `+nodeName+`
  dnsPolicy: Default
  volumes: [{name: conf, configMap: {name: corefile}}]
  containers:
  - name: main
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    command: [/coredns]
    args: [-conf, /etc/coredns/Corefile]
    volumeMounts: [{name: conf, mountPath: /etc/coredns, readOnly: true}]
`, "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		ip := c.jsonpath("pod", "hostsdns", "{.status.podIP}")
		if ip == "" {
			return "hostsdns has no IP"
		}
		cmd := "dig +short @" + ip + " notexistname.resolv.conf.local A; dig @" + ip + " other.example A | grep -o SERVFAIL"
		if out, err := c.kubectl("", "exec", "glibc", "--", "/bin/sh", "-c", cmd); err != nil || out != "1.1.1.1\nSERVFAIL\n" {
			return fmt.Sprintf("%s: %v %q", cmd, err, out)
		}
		return ""
	})
	webIP := c.jsonpath("service", "web", "{.spec.clusterIP}")
	for pod, cmd := range map[string]string{
		"execpod": "getent hosts web",
		"glibc":   "dig +notcp +noall +answer +search web A && getent hosts web",
	} {
		eventually(t, 60*time.Second, func() string {
			if out, err := c.kubectl("", "exec", pod, "--", "/bin/sh", "-c", cmd); err != nil || !strings.Contains(out, webIP) {
				return fmt.Sprintf("%s in %s: %v %q, want %s", cmd, pod, err, out, webIP)
			}
			return ""
		})
	}
	// One shim host, not a shim per container, is the parent of all of
	// them: the node's own processes add its ~9 MB once.
	if hosts := shimHosts(t, c.dataDir); len(hosts) != 1 || !strings.HasPrefix(slices.Collect(maps.Values(hosts))[0], "node shims ") {
		t.Errorf("the running containers' shims: %v, want one shim host (svcnet node shims)", hosts)
	}
	web := strings.Fields(c.must("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"))
	if id := c.jsonpath("pod", web[0], "{.status.containerStatuses[0].imageID}"); !strings.HasPrefix(id, "localhost/nginx@sha256:") {
		t.Errorf("pod %s: imageID %q, want the assembled image localhost/nginx@sha256:...", web[0], id)
	}
	if out := c.must("exec", web[0], "--", "ls", "/"); !strings.Contains(out, "svcnet") || strings.Contains(out, "home") {
		t.Errorf("kubectl exec %s ls / lists %q, want the assembled image's root with /svcnet", web[0], out)
	}
	eventually(t, 30*time.Second, func() string {
		if names := c.jsonpath("node", nodeName, "{.status.images[*].names}"); !strings.Contains(names, "localhost/nginx:svcnet") || !strings.Contains(names, "localhost/busybox:svcnet") {
			return "node images: " + names
		}
		return ""
	})

	// shareProcessNamespace: the pod's containers share one PID
	// namespace, whose first process is the pod's pause container; a
	// container sees and signals the other's processes. Without it, each
	// container's own process is PID 1.
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: shared-pids}
spec:
  nodeName: `+nodeName+`
  shareProcessNamespace: true
  terminationGracePeriodSeconds: 2
  containers:
  - {name: sleeper, image: "busybox:1.36", command: [sleep, "3601"]}
  - {name: shell, image: "busybox:1.36", command: [sleep, "3602"]}
`, "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		out, err := c.kubectl("", "exec", "shared-pids", "-c", "shell", "--", "sh", "-c", "cat /proc/1/cmdline | tr '\\0' ' '; echo; ps -o pid,args")
		if err != nil || !strings.Contains(out, "pause") || !strings.Contains(out, "sleep 3601") || !strings.Contains(out, "sleep 3602") {
			return fmt.Sprintf("PID 1 and processes seen from the shell container: %v %q", err, out)
		}
		return ""
	})
	c.must("exec", "shared-pids", "-c", "shell", "--", "sh", "-c",
		`for p in /proc/[0-9]*; do if [ "$(tr '\0' ' ' < $p/cmdline)" = "sleep 3601 " ]; then kill ${p#/proc/}; echo killed; fi; done`)
	eventually(t, 60*time.Second, func() string {
		if n := c.jsonpath("pod", "shared-pids", `{.status.containerStatuses[?(@.name=="sleeper")].restartCount}`); n != "1" {
			return "restarts of the container whose process the other killed: " + n
		}
		return ""
	})
	if out := c.must("exec", "client", "--", "cat", "/proc/1/cmdline"); !strings.HasPrefix(out, "sleep") {
		t.Errorf("PID 1 of a pod without shareProcessNamespace: %q, want its own sleep", out)
	}
	c.must("delete", "pod", "shared-pids", "--wait=true")

	// A read-only root file system refuses writes; a process outgrowing
	// its memory limit is OOMKilled (exit 137) and restarted once (its
	// second run finds the mark its first left in an emptyDir).
	c.pod("readonly", image, `    command: [sh, -c, 'echo x > /f || echo write-refused; exec sleep 3600']
    securityContext: {readOnlyRootFilesystem: true}
`)
	// The busybox image's shell is busybox's ash, with its messages.
	c.pod("readonly-busybox", "registry.k8s.io/e2e-test-images/busybox:1.37.0-2", `    command: [/bin/sh, -c, 'echo test > /file; exec sleep 3600']
    securityContext: {readOnlyRootFilesystem: true}
`)
	c.pod("oom", image, `    command: [sh, -c, 'if [ -e /data/ran ]; then exec sleep 3600; fi; touch /data/ran; x=$(head -c 67108864 /dev/zero | tr "\\0" a); echo survived']
    resources: {limits: {memory: 32Mi}}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`)
	// seccompProfile RuntimeDefault: containerd's filter is on.
	c.pod("filtered", image, `    command: [sh, -c, 'grep Seccomp: /proc/self/status; exec sleep 3600']
    securityContext: {seccompProfile: {type: RuntimeDefault}}
`)
	eventually(t, 60*time.Second, func() string {
		if logs, _ := c.kubectl("", "logs", "filtered"); !strings.Contains(logs, "Seccomp:\t2") {
			return fmt.Sprintf("logs of filtered: %q, want Seccomp: 2 (filter mode)", logs)
		}
		return ""
	})
	eventually(t, 60*time.Second, func() string {
		if logs, _ := c.kubectl("", "logs", "readonly"); !strings.Contains(logs, "Read-only file system") || !strings.Contains(logs, "write-refused") {
			return "logs of readonly: " + logs
		}
		if logs, _ := c.kubectl("", "logs", "readonly-busybox"); logs != "/bin/sh: can't create /file: Read-only file system\n" {
			return fmt.Sprintf("logs of readonly-busybox: %q", logs)
		}
		return ""
	})
	eventually(t, 60*time.Second, func() string {
		last := c.jsonpath("pod", "oom", "{.status.containerStatuses[0].lastState.terminated.reason} {.status.containerStatuses[0].lastState.terminated.exitCode} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].ready}")
		if last != "OOMKilled 137 1 true" {
			return fmt.Sprintf("pod oom: last reason, exit code, restarts, ready %q, want \"OOMKilled 137 1 true\"", last)
		}
		return ""
	})

	// Image volumes: an image's root file system, read-only, in the pod,
	// from a pulled image (held from the garbage collector, which runs at
	// any usage here) and from an assembled one (upstream's kitten, with
	// its /data.json and its Alpine base's /etc/os-release, which
	// upstream's ImageVolume test reads); the mounts go with the pod.
	c.pod("imagevol", "busybox", `    command: [sh, -c, 'ls /pulled/bin/busybox /kitten/data.json && grep ^NAME= /kitten/etc/os-release && (touch /pulled/x || echo write-refused); exec sleep 3600']
    volumeMounts: [{name: pulled, mountPath: /pulled}, {name: kitten, mountPath: /kitten}]
  volumes:
  - {name: pulled, image: {reference: `+image+`, pullPolicy: IfNotPresent}}
  - {name: kitten, image: {reference: "registry.k8s.io/e2e-test-images/kitten:1.7"}}
`)
	eventually(t, 60*time.Second, func() string {
		logs, _ := c.kubectl("", "logs", "imagevol")
		if !strings.Contains(logs, "/pulled/bin/busybox\n") || !strings.Contains(logs, "/kitten/data.json\n") || !strings.Contains(logs, "NAME=\"Alpine Linux\"\n") || !strings.Contains(logs, "write-refused") {
			return fmt.Sprintf("logs of imagevol: %q; events: %s", logs, c.must("get", "events", "--field-selector", "involvedObject.name=imagevol"))
		}
		return ""
	})
	c.must("delete", "pod", "imagevol", "--wait=true")
	eventually(t, 30*time.Second, func() string {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, c.dataDir) && strings.Contains(line, "kubernetes.io~image") {
				return "an image volume stays mounted after its pod was deleted: " + line
			}
		}
		return ""
	})

	// Termination messages, as the kubelet reads them: the file at
	// terminationMessagePath (written by a user other than root), or the
	// log's tail for a failure with FallbackToLogsOnError.
	c.pod("said", image, `    command: [sh, -c, 'echo goodbye > /dev/termination-log; exit 3']
    securityContext: {runAsUser: 1000}
  restartPolicy: Never
`)
	c.pod("logged", image, `    command: [sh, -c, 'echo went wrong; exit 2']
    terminationMessagePolicy: FallbackToLogsOnError
  restartPolicy: Never
`)
	for pod, want := range map[string]string{"said": "3 goodbye\n", "logged": "2 went wrong\n"} {
		eventually(t, 60*time.Second, func() string {
			got := c.jsonpath("pod", pod, "{.status.containerStatuses[0].state.terminated.exitCode} {.status.containerStatuses[0].state.terminated.message}")
			if got != want {
				return fmt.Sprintf("pod %s: exit code and termination message %q, want %q", pod, got, want)
			}
			return ""
		})
	}

	// upstream's nonewprivs image: its setuid-root program gives a user
	// root's effective uid, unless the container may not escalate
	// privileges (no_new_privs), as upstream's allowPrivilegeEscalation
	// tests expect.
	nnp := map[string]string{"nnp-nil": "{runAsUser: 1000}", "nnp-false": "{runAsUser: 1000, allowPrivilegeEscalation: false}", "nnp-true": "{runAsUser: 1000, allowPrivilegeEscalation: true}"}
	for pod, sc := range nnp {
		c.pod(pod, "registry.k8s.io/e2e-test-images/nonewprivs:1.3", "    securityContext: "+sc+"\n  restartPolicy: Never\n")
	}
	for pod, want := range map[string]string{"nnp-nil": "Effective uid: 0\n", "nnp-false": "Effective uid: 1000\n", "nnp-true": "Effective uid: 0\n"} {
		eventually(t, 60*time.Second, func() string {
			if phase := c.jsonpath("pod", pod, "{.status.phase}"); phase != "Succeeded" {
				return fmt.Sprintf("pod %s is %s", pod, phase)
			}
			if logs, _ := c.kubectl("", "logs", pod); logs != want {
				return fmt.Sprintf("pod %s says %q, want %q", pod, logs, want)
			}
			return ""
		})
	}

	// kubectl top reads the container's cgroup: the memory it shows is
	// within 10% of the cgroup's own counter (the container holds 32 MiB
	// in its /dev/shm, shared memory, which the working set counts).
	c.pod("hog", image, `    command: [sh, -c, 'head -c 33554432 /dev/zero > /dev/shm/hold; echo holding; exec sleep 3600']
`)
	eventually(t, 90*time.Second, func() string {
		id := strings.TrimPrefix(c.jsonpath("pod", "hog", "{.status.containerStatuses[0].containerID}"), "svcnet://")
		want, err := cgroupMemory("/svcnet/" + id)
		if err != nil || want < 32<<20 {
			return fmt.Sprintf("cgroup of hog's container %q: %d bytes, %v", id, want, err)
		}
		out, err := c.kubectl("", "top", "pod", "hog", "--no-headers")
		f := strings.Fields(out)
		if err != nil || len(f) != 3 || !strings.HasSuffix(f[2], "Mi") {
			return "kubectl top pod hog: " + out
		}
		mi, _ := strconv.ParseFloat(strings.TrimSuffix(f[2], "Mi"), 64)
		if got := mi * (1 << 20); math.Abs(got-float64(want)) > 0.1*float64(want) {
			return fmt.Sprintf("kubectl top pod hog shows %s, the cgroup's counter %.1fMi", f[2], float64(want)/(1<<20))
		}
		return ""
	})

	// The kubelet's waiting reasons for images that cannot be had.
	c.pod("never", host+"/e2e/absent:1", "    imagePullPolicy: Never\n")
	c.pod("missing", host+"/e2e/busybox:nosuch", "")
	waitReason := func(pod, want, msg string) {
		eventually(t, 60*time.Second, func() string {
			st := c.jsonpath("pod", pod, "{.status.containerStatuses[0].state.waiting}")
			if !strings.Contains(st, `"reason":"`+want+`"`) || !strings.Contains(st, msg) {
				return fmt.Sprintf("pod %s waiting %s, want %s with %q", pod, st, want, msg)
			}
			return ""
		})
	}
	// Once no pod uses it, the garbage collector removes the pulled image;
	// the images the node assembles are pinned.
	c.must("delete", "deployment", "isolated", "--wait=false")
	c.must("delete", "pod", "readonly", "oom", "filtered", "hog", "said", "logged", "--wait=false")
	eventually(t, 90*time.Second, func() string {
		names := c.jsonpath("node", nodeName, "{.status.images[*].names}")
		if strings.Contains(names, image) || !strings.Contains(names, "localhost/nginx:svcnet") {
			return fmt.Sprintf("node images %s: want %s collected, localhost/nginx:svcnet kept", names, image)
		}
		return ""
	})

	waitReason("never", "ErrImageNeverPull", `Container image \"`+host+`/e2e/absent:1\" is not present with pull policy of Never`)
	// ErrImagePull lasts until the next sync; its events stay.
	missing := host + "/e2e/busybox:nosuch"
	waitReason("missing", "ImagePullBackOff", `Back-off pulling image \"`+missing+`\": ErrImagePull: `)
	events = c.must("get", "events", "--field-selector", "involvedObject.name=missing")
	for _, want := range []string{`Failed to pull image "` + missing + `": failed to pull and unpack image`, missing + ": not found", "Error: ErrImagePull"} {
		if !strings.Contains(events, want) {
			t.Errorf("events of pod missing lack %q:\n%s", want, events)
		}
	}
}

// cgroupMemory reads a container's memory in use from its cgroup's own
// counter (v2's memory.current, v1's memory.usage_in_bytes).
func cgroupMemory(path string) (int64, error) {
	b, err := os.ReadFile("/sys/fs/cgroup" + path + "/memory.current")
	if err != nil {
		if b, err = os.ReadFile("/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes"); err != nil {
			return 0, err
		}
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// shimHosts are the command lines of the shims that the state records of
// the node's running containers name, by PID.
func shimHosts(t *testing.T, dataDir string) map[int]string {
	t.Helper()
	states, _ := filepath.Glob(filepath.Join(dataDir, "node", "pods", "*", "containers", "*", "*", "state.json"))
	out := map[int]string{}
	for _, f := range states {
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "exit.json")); err == nil {
			continue
		}
		var st struct {
			ShimPID int `json:"shimPID"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &st) != nil {
			t.Fatalf("state record %s: %v", f, err)
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.ShimPID))
		args := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
		if len(args) > 0 {
			args = args[1:] // the executable's path
		}
		out[st.ShimPID] = strings.Join(args, " ")
	}
	return out
}

// seedLab runs the seed lab on the node: an nginx Deployment of two
// behind a Service, fetched by its DNS name (CoreDNS) from a busybox
// client pod named client.
func seedLab(t *testing.T, c *nodeCluster) {
	t.Helper()
	c.withStdin(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeName: `+nodeName+`
      terminationGracePeriodSeconds: 2
      containers:
      - {name: nginx, image: "nginx:1.25", ports: [{containerPort: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
`, "apply", "-f", "-")
	c.pod("client", "busybox:1.36", "    command: [sleep, '3600']\n")
	eventually(t, 90*time.Second, func() string {
		out, err := c.kubectl("", "exec", "client", "--", "wget", "-qO-", "http://web.default.svc.cluster.local")
		if err != nil || !strings.Contains(out, "Welcome to nginx!") {
			return fmt.Sprintf("wget http://web from client: %v %q; pods: %s", err, out, c.must("get", "pods", "-o", "wide"))
		}
		return ""
	})
}

// TestProcessRuntimeSeedLab: with --runtime process (machines without
// runc), the image table's programs run as host processes and the seed
// lab works as under runc.
func TestProcessRuntimeSeedLab(t *testing.T) {
	t.Parallel()
	needRoot(t)
	c := startNodeCluster(t, "--runtime", "process")
	seedLab(t, c)
	if hosts := shimHosts(t, c.dataDir); len(hosts) < 3 || slices.ContainsFunc(slices.Collect(maps.Values(hosts)), func(cmd string) bool { return !strings.HasPrefix(cmd, "node shim ") }) {
		t.Errorf("the running containers' shims: %v, want a shim each (svcnet node shim)", hosts)
	}
	// A host process sees the host's root.
	if out := c.must("exec", "client", "--", "ls", "/etc/os-release"); !strings.Contains(out, "/etc/os-release") {
		t.Errorf("kubectl exec client ls /etc/os-release: %q, want the host's file", out)
	}
}

// containerCgroups are the cgroups (paths under each hierarchy) of the
// containers a node has run, from their bundles' config.json.
func containerCgroups(t *testing.T, dataDir string) []string {
	configs, _ := filepath.Glob(filepath.Join(dataDir, "node", "pods", "*", "containers", "*", "*", "config.json"))
	var paths []string
	for _, f := range configs {
		var spec struct {
			Linux struct {
				CgroupsPath string `json:"cgroupsPath"`
			} `json:"linux"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &spec) != nil || spec.Linux.CgroupsPath == "" {
			t.Errorf("no cgroup in %s: %v", f, err)
			continue
		}
		paths = append(paths, spec.Linux.CgroupsPath)
	}
	if len(paths) == 0 {
		t.Errorf("no container bundles under %s", dataDir)
	}
	return paths
}
