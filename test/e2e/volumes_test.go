package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Mount paths that do not exist on the host: the node makes them inside
// the containers' mount namespaces only.
const (
	rootMount = "/svcnet-e2e-shared"
	etcMount  = "/etc/svcnet-e2e-config"
)

func assertNotOnHost(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists on the host (%v): a mount point leaked out of a container", p, err)
		}
	}
}

// waitLog waits until the pod's container log holds want.
func (c *nodeCluster) waitLog(pod, container, want string, timeout time.Duration) {
	c.t.Helper()
	eventually(c.t, timeout, func() string {
		out, _ := c.kubectl("", "logs", pod, "-c", container)
		if !strings.Contains(out, want) {
			return fmt.Sprintf("logs of %s/%s lack %q:\n%s", pod, container, want, out)
		}
		return ""
	})
}

// TestVolumeConfigMapUpdates is seed 003's lab: a ConfigMap as a file and
// as an env var; an edit of the ConfigMap reaches the file within the sync
// period while the env var keeps its value. A pod whose ConfigMap does not
// exist waits in ContainerCreating with upstream's FailedMount event.
func TestVolumeConfigMapUpdates(t *testing.T) {
	t.Parallel()
	assertNotOnHost(t, etcMount)
	c := startNodeCluster(t)
	c.pod("waiter", "busybox", `    command: [sh, -c, 'cat /config/color; echo; sleep 3600']
    volumeMounts: [{name: config, mountPath: /config}]
  volumes:
  - {name: config, configMap: {name: late}}
`)
	eventually(t, 20*time.Second, func() string {
		ev, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name=waiter,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, `MountVolume.SetUp failed for volume "config" : configmap "late" not found`) {
			return "no FailedMount event yet: " + ev
		}
		return ""
	})
	if got := c.jsonpath("pod", "waiter", "{.status.phase} {.status.containerStatuses[0].state.waiting.reason}"); got != "Pending ContainerCreating" {
		t.Errorf("pod with a missing ConfigMap: %s, want Pending ContainerCreating", got)
	}

	c.must("create", "configmap", "settings", "--from-literal=color=blue")
	c.pod("reader", "busybox", fmt.Sprintf(`    command: [sh, -c, 'while true; do echo "file=$(cat %[1]s/color) env=$COLOR"; sleep 1; done']
    env: [{name: COLOR, valueFrom: {configMapKeyRef: {name: settings, key: color}}}]
    volumeMounts: [{name: config, mountPath: %[1]s}]
  volumes:
  - {name: config, configMap: {name: settings}}
`, etcMount))
	c.waitReady("reader", "True", 30*time.Second)
	c.waitLog("reader", "main", "file=blue env=blue", 10*time.Second)

	c.must("patch", "configmap", "settings", "-p", `{"data":{"color":"red"}}`)
	start := time.Now()
	c.waitLog("reader", "main", "file=red env=blue", 60*time.Second)
	t.Logf("the file changed %s after the patch", time.Since(start).Round(time.Second))

	// The missing ConfigMap appears: the waiting pod starts.
	c.must("create", "configmap", "late", "--from-literal=color=green")
	c.waitReady("waiter", "True", 30*time.Second)
	c.waitLog("waiter", "main", "green", 10*time.Second)
	assertNotOnHost(t, etcMount)
}

// TestVolumeSecretAndProjections: a Secret's decoded value with the modes
// asked for, projected and downward API files, and no secret value in the
// events or the cluster's log.
func TestVolumeSecretAndProjections(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.must("create", "secret", "generic", "creds", "--from-literal=password=s3cret-v4lue", "--from-literal=user=admin")
	c.must("create", "configmap", "app", "--from-literal=mode=prod")
	c.pod("secretive", "busybox", `    command: [sh, -c, 'stat -L -c "%a %n" /creds/password /items/pw /all/secret/user /all/token; echo "pw=$(cat /creds/password)"; echo "mode=$(cat /all/mode) name=$(cat /all/name)"; cat /info/labels; echo; sleep 3600']
    volumeMounts:
    - {name: creds, mountPath: /creds}
    - {name: items, mountPath: /items}
    - {name: all, mountPath: /all}
    - {name: info, mountPath: /info}
  volumes:
  - {name: creds, secret: {secretName: creds, defaultMode: 0400}}
  - name: items
    secret: {secretName: creds, items: [{key: password, path: pw, mode: 0440}]}
  - name: all
    projected:
      sources:
      - configMap: {name: app}
      - secret: {name: creds, items: [{key: user, path: secret/user, mode: 0400}]}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
      - serviceAccountToken: {path: token}
  - name: info
    downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}
`)
	c.waitReady("secretive", "True", 30*time.Second)
	c.waitLog("secretive", "main", `app="secretive"`, 10*time.Second)
	logs := c.must("logs", "secretive")
	for _, want := range []string{"400 /creds/password\n", "440 /items/pw\n", "400 /all/secret/user\n", "644 /all/token\n",
		"pw=s3cret-v4lue\n", "mode=prod name=secretive\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	// The downward API file follows the pod's labels.
	c.must("label", "pod", "secretive", "tier=web")
	eventually(t, 60*time.Second, func() string {
		pid := c.containerPID("secretive", "main")
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/info/labels", pid))
		if err != nil || !strings.Contains(string(b), `tier="web"`) {
			return fmt.Sprintf("labels file %q (%v)", b, err)
		}
		return ""
	})
	if ev := c.must("get", "events", "-o", "yaml"); strings.Contains(ev, "s3cret-v4lue") {
		t.Errorf("a secret value is in the events")
	}
	if strings.Contains(c.log.String(), "s3cret-v4lue") {
		t.Errorf("a secret value is in the cluster's log")
	}
}

// containerPID reads the PID of the pod's container from the node's state
// files.
func (c *nodeCluster) containerPID(pod, container string) int {
	c.t.Helper()
	uid := c.jsonpath("pod", pod, "{.metadata.uid}")
	runs, _ := filepath.Glob(filepath.Join(c.dataDir, "node", "pods", uid, "containers", container, "*", "state.json"))
	for _, f := range runs {
		if _, err := os.Stat(filepath.Join(filepath.Dir(f), "exit.json")); err == nil {
			continue
		}
		var st struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &st) == nil {
			return st.PID
		}
	}
	c.t.Fatalf("no running container %s in pod %s", container, pod)
	return 0
}

// TestVolumeEmptyDirHostPathSubPathReadOnly: an emptyDir shared by two
// containers (and one in memory), hostPath types, subPath and readOnly.
func TestVolumeEmptyDirHostPathSubPathReadOnly(t *testing.T) {
	t.Parallel()
	assertNotOnHost(t, rootMount)
	c := startNodeCluster(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "given.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.pod("sharer", "busybox", fmt.Sprintf(`    command: [sh, -c, 'echo hello-from-main > %[1]s/msg; awk "\$2==\"/mem\" {print \"mem=\" \$3}" /proc/mounts; cat /given; echo; touch /ro/x 2>&1 || echo ro-denied; echo sub > /sub/written; echo POD_NAME=$POD_NAME > /expr/who; sleep 3600']
    env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    volumeMounts:
    - {name: shared, mountPath: %[1]s}
    - {name: mem, mountPath: /mem}
    - {name: host, mountPath: /given, subPath: given.txt}
    - {name: host, mountPath: /ro, readOnly: true}
    - {name: host, mountPath: /sub, subPath: made/here}
    - {name: host, mountPath: /expr, subPathExpr: $(POD_NAME)}
    - {name: untyped, mountPath: /untyped}
  - name: second
    image: busybox
    command: [sh, -c, 'while ! cat %[1]s/msg; do sleep 0.2; done; sleep 3600']
    volumeMounts: [{name: shared, mountPath: %[1]s}]
  volumes:
  - {name: shared, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
  - {name: host, hostPath: {path: %[2]s, type: Directory}}
  - {name: untyped, hostPath: {path: %[2]s/untyped/dir}}
`, rootMount, host))
	c.pod("hostcheck", "busybox", fmt.Sprintf(`    command: [sleep, "3600"]
    volumeMounts: [{name: made, mountPath: /made}, {name: file, mountPath: /file}]
  volumes:
  - {name: made, hostPath: {path: %[1]s/created/dir, type: DirectoryOrCreate}}
  - {name: file, hostPath: {path: %[1]s/given.txt, type: Directory}}
`, host))
	c.withStdin(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
`, "apply", "-f", "-")
	c.pod("claimer", "busybox", `    command: [sleep, "3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data}}
`)
	c.waitReady("sharer", "True", 30*time.Second)
	c.waitLog("sharer", "second", "hello-from-main", 10*time.Second)
	logs := c.must("logs", "sharer", "-c", "main")
	for _, want := range []string{"mem=tmpfs\n", "from the host\n", "Read-only file system", "ro-denied\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs of main lack %q:\n%s", want, logs)
		}
	}
	if b, err := os.ReadFile(filepath.Join(host, "made", "here", "written")); err != nil || string(b) != "sub\n" {
		t.Errorf("the subPath write reached the host as %q (%v)", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "sharer", "who")); err != nil || string(b) != "POD_NAME=sharer\n" {
		t.Errorf("the subPathExpr write reached the host as %q (%v)", b, err)
	}
	// A hostPath without a type whose path is missing is made a
	// directory by the runtime, as containerd makes it.
	if info, err := os.Stat(filepath.Join(host, "untyped", "dir")); err != nil || !info.IsDir() {
		t.Errorf("the untyped hostPath's missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(host, "x")); err == nil {
		t.Errorf("a write through the read-only mount reached the host")
	}
	assertNotOnHost(t, rootMount, "/mem", "/given", "/ro", "/sub", "/expr")
	// A process entering the container's mount namespace (as exec does)
	// sees its mounts.
	pid := c.containerPID("sharer", "second")
	if out, err := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--mount", "cat", rootMount+"/msg").CombinedOutput(); err != nil || string(out) != "hello-from-main\n" {
		t.Errorf("nsenter into the mount namespace reads %q (%v)", out, err)
	}

	// hostPath types: DirectoryOrCreate makes the directory; a file where
	// a Directory is wanted keeps the pod waiting.
	eventually(t, 20*time.Second, func() string {
		ev, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name=hostcheck,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		want := fmt.Sprintf(`MountVolume.SetUp failed for volume "file" : hostPath type check failed: %s/given.txt is not a directory, it's a File`, host)
		if !strings.Contains(ev, want) {
			return "FailedMount events: " + ev
		}
		return ""
	})
	// A claim that is not bound keeps its pod waiting.
	eventually(t, 20*time.Second, func() string {
		ev, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name=claimer,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		want := "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC default/data: PVC is not bound"
		if !strings.Contains(ev, want) {
			return "FailedMount events: " + ev
		}
		return ""
	})
	if got := c.jsonpath("pod", "claimer", "{.status.containerStatuses[0].state.waiting.reason}"); got != "ContainerCreating" {
		t.Errorf("pod of an unbound claim is waiting for %q, want ContainerCreating", got)
	}
	if info, err := os.Stat(filepath.Join(host, "created", "dir")); err != nil || !info.IsDir() {
		t.Errorf("DirectoryOrCreate made no directory: %v", err)
	}

	// The pod's tmpfs volumes go with it.
	uid := c.jsonpath("pod", "sharer", "{.metadata.uid}")
	podMounts := func() string {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, uid) {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	if m := podMounts(); !strings.Contains(m, "kubernetes.io~empty-dir/mem") {
		t.Errorf("no tmpfs for the Memory emptyDir on the node:\n%s", m)
	}
	c.must("delete", "pod", "sharer", "--grace-period=1")
	eventually(t, 10*time.Second, podMounts)
}
