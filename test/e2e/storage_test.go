package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// claimManifest is a PersistentVolumeClaim; class "-" leaves
// storageClassName out.
func claimManifest(name, class, size, mode, extra string) string {
	classLine := ""
	if class != "-" {
		classLine = fmt.Sprintf("\n  storageClassName: %q", class)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s}
spec:
  accessModes: [%s]
  resources: {requests: {storage: %s}}%s
%s`, name, mode, size, classLine, extra)
}

// claimPod is a busybox pod, placed by the scheduler (on the test's one
// node), that runs script with claim mounted at /data.
func (c *nodeCluster) claimPod(name, claim, script string) {
	c.t.Helper()
	c.scheduledPod(name, fmt.Sprintf(`  containers:
  - name: main
    image: busybox
    command: [sh, -c, %q]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: %s}}
`, script, claim))
}

// squeezed is a table with each run of spaces one space.
func squeezed(table string) string {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// waitPhase waits for a claim's or volume's phase.
func (c *nodeCluster) waitPhase(kind, name, want string, timeout time.Duration) {
	c.t.Helper()
	eventually(c.t, timeout, func() string {
		if got := c.jsonpath(kind, name, "{.status.phase}"); got != want {
			return fmt.Sprintf("%s %s is %q, want %q: %s", kind, name, got, want, c.jsonpath(kind, name, "{.status}"))
		}
		return ""
	})
}

// waitGone waits until an object is deleted.
func (c *nodeCluster) waitGone(kind, name string, timeout time.Duration) {
	c.t.Helper()
	eventually(c.t, timeout, func() string {
		out, err := c.kubectl("", "get", kind, name, "-o", "name")
		if err == nil {
			return fmt.Sprintf("%s still there: %s", kind+"/"+name, out)
		}
		return ""
	})
}

// waitClaimEvent waits for an event of a claim with reason and message
// from component.
func (c *nodeCluster) waitClaimEvent(name, component, reason, message string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, func() string {
		out := c.must("get", "events", "--field-selector", "involvedObject.kind=PersistentVolumeClaim,involvedObject.name="+name,
			"-o", "custom-columns=SOURCE:.source.component,REASON:.reason,MESSAGE:.message", "--no-headers")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == component && f[1] == reason && strings.Join(f[2:], " ") == message {
				return ""
			}
		}
		return fmt.Sprintf("no event %s %q from %s on claim %s:\n%s", reason, message, component, name, out)
	})
}

// TestPersistentVolumes is seed 003's storage lab on one node: the
// StorageClasses up installs, a classless 1Gi RWO claim getting standard
// and, once its node is selected, a local volume whose data outlives the
// pod; Delete and Retain; a static hostPath volume bound by selector while
// a bigger claim waits with upstream's event; pvc-protection; resizing;
// the shared class; and bad claims refused as upstream refuses them.
func TestPersistentVolumes(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	eventually(t, 30*time.Second, func() string {
		out, _ := c.kubectl("", "get", "sc")
		out = squeezed(out)
		for _, want := range []string{
			"NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
			"standard (default) svcnet.io/local-path Delete WaitForFirstConsumer true",
			"shared svcnet.io/shared-path Delete Immediate true",
		} {
			if !strings.Contains(out, want) {
				return fmt.Sprintf("kubectl get sc lacks %q:\n%s", want, out)
			}
		}
		return ""
	})

	// The seed's claim: no class, so the default one.
	c.withStdin(claimManifest("data", "-", "1Gi", "ReadWriteOnce", ""), "apply", "-f", "-")
	if got := c.jsonpath("pvc", "data", "{.spec.storageClassName} {.metadata.finalizers}"); got != `standard ["kubernetes.io/pvc-protection"]` {
		t.Errorf("claim data: class and finalizers %s", got)
	}
	c.waitClaimEvent("data", "persistentvolume-controller", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	c.claimPod("writer", "data", "echo kept > /data/file; sleep 3600")
	// The scheduler names the pod's node on the claim for its provisioner.
	c.waitPhase("pvc", "data", "Bound", 30*time.Second)
	if got := c.jsonpath("pvc", "data", `{.metadata.annotations.volume\.kubernetes\.io/selected-node}`); got != nodeName {
		t.Errorf("claim data: selected-node %q, want %q", got, nodeName)
	}
	c.waitPhase("pvc", "data", "Bound", 30*time.Second)
	pv := c.jsonpath("pvc", "data", "{.spec.volumeName}")
	c.waitClaimEvent("data", "svcnet.io/local-path_"+nodeName, "ProvisioningSucceeded", "Successfully provisioned volume "+pv)
	c.waitClaimEvent("data", "persistentvolume-controller", "ExternalProvisioning",
		"Waiting for a volume to be created either by the external provisioner 'svcnet.io/local-path' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	if got := c.jsonpath("pv", pv, `{.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].key}={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]} {.spec.claimRef.name} {.status.phase} {.spec.persistentVolumeReclaimPolicy}`); got != "svcnet.io/local-path kubernetes.io/hostname="+nodeName+" data Bound Delete" {
		t.Errorf("provisioned volume: %s", got)
	}
	dir := c.jsonpath("pv", pv, "{.spec.hostPath.path}")
	if want := filepath.Join(c.dataDir, "local-path-provisioner", pv+"_default_data"); dir != want {
		t.Errorf("volume directory %s, want %s", dir, want)
	}
	if got := c.jsonpath("pvc", "data", `{.metadata.annotations.pv\.kubernetes\.io/bind-completed} {.status.capacity.storage} {.status.accessModes}`); got != `yes 1Gi ["ReadWriteOnce"]` {
		t.Errorf("bound claim: %s", got)
	}
	c.waitReady("writer", "True", 30*time.Second)
	eventually(t, 10*time.Second, func() string {
		if b, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(b) != "kept\n" {
			return fmt.Sprintf("file in the volume's directory: %q %v", b, err)
		}
		return ""
	})
	c.must("delete", "pod", "writer")
	c.claimPod("reader", "data", "cat /data/file; sleep 3600")
	c.waitLog("reader", "main", "kept", 30*time.Second)
	// Its logs read while it started did not count it as killed.
	if got := c.jsonpath("pod", "reader", "{.status.containerStatuses[0].restartCount}"); got != "0" {
		t.Errorf("reader restarted %s times", got)
	}
	out := squeezed(c.must("get", "pvc", "data"))
	if !strings.HasPrefix(out, "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE\n") ||
		!strings.Contains(out, "\ndata Bound "+pv+" 1Gi RWO standard <unset> ") {
		t.Errorf("kubectl get pvc:\n%s", out)
	}

	// Resizing: standard allows expansion.
	c.must("patch", "pvc", "data", "-p", `{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	eventually(t, 30*time.Second, func() string {
		if got := c.jsonpath("pvc", "data", "{.status.capacity.storage}") + " " + c.jsonpath("pv", pv, "{.spec.capacity.storage}"); got != "2Gi 2Gi" {
			return "claim and volume capacity " + got
		}
		return ""
	})

	// pvc-protection: the claim stays Terminating while the pod runs.
	c.must("delete", "pvc", "data", "--wait=false")
	eventually(t, 10*time.Second, func() string {
		if out := squeezed(c.must("get", "pvc", "data")); !strings.Contains(out, "\ndata Terminating "+pv) {
			return "claim in use not Terminating:\n" + out
		}
		return ""
	})
	if got := c.jsonpath("pod", "reader", "{.status.phase}"); got != "Running" {
		t.Errorf("the pod using the deleted claim is %s", got)
	}
	c.must("delete", "pod", "reader")
	// Delete: the claim, the volume and its directory go.
	c.waitGone("pvc", "data", 30*time.Second)
	c.waitGone("pv", pv, 30*time.Second)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory of the deleted volume: %v", err)
	}

	// Retain: the volume goes Released and keeps its data.
	c.withStdin(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: keep}
provisioner: svcnet.io/local-path
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
`, "apply", "-f", "-")
	c.withStdin(claimManifest("kept", "keep", "1Gi", "ReadWriteOnce", ""), "apply", "-f", "-")
	c.claimPod("keeper", "kept", "echo retained > /data/file; sleep 3600")
	c.waitReady("keeper", "True", 30*time.Second)
	kept := c.jsonpath("pvc", "kept", "{.spec.volumeName}")
	keptDir := c.jsonpath("pv", kept, "{.spec.hostPath.path}")
	c.must("delete", "pod", "keeper")
	c.must("delete", "pvc", "kept")
	c.waitPhase("pv", kept, "Released", 30*time.Second)
	if b, err := os.ReadFile(filepath.Join(keptDir, "file")); err != nil || string(b) != "retained\n" {
		t.Errorf("data of the retained volume: %q %v", b, err)
	}
	if got := c.jsonpath("pv", kept, "{.status.lastPhaseTransitionTime}"); got == "" {
		t.Error("no lastPhaseTransitionTime")
	}

	// A static hostPath volume binds to a smaller claim by selector; a
	// claim no volume fits waits.
	static := filepath.Join(c.dataDir, "static")
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-5g, labels: {type: local}}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: ""
  hostPath: {path: %s, type: DirectoryOrCreate}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-srv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: ""
  hostPath: {path: /srv/svcnet-e2e-not-created}
`, static), "apply", "-f", "-")
	c.waitPhase("pv", "pv-5g", "Available", 30*time.Second)
	c.withStdin(claimManifest("small", "", "2Gi", "ReadWriteOnce", "  selector: {matchLabels: {type: local}}"), "apply", "-f", "-")
	c.withStdin(claimManifest("big", "", "10Gi", "ReadWriteOnce", ""), "apply", "-f", "-")
	c.waitPhase("pvc", "small", "Bound", 30*time.Second)
	if got := c.jsonpath("pvc", "small", "{.spec.volumeName} {.status.capacity.storage}"); got != "pv-5g 5Gi" {
		t.Errorf("claim small: %s", got)
	}
	if got := c.jsonpath("pv", "pv-5g", `{.spec.claimRef.name} {.metadata.annotations.pv\.kubernetes\.io/bound-by-controller} {.metadata.finalizers}`); got != `small yes ["kubernetes.io/pv-protection"]` {
		t.Errorf("volume pv-5g: %s", got)
	}
	c.waitClaimEvent("big", "persistentvolume-controller", "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
	if got := c.jsonpath("pvc", "big", "{.status.phase}"); got != "Pending" {
		t.Errorf("claim big is %s", got)
	}
	out = squeezed(c.must("get", "pv", "pv-5g", "-o", "wide"))
	// The empty STORAGECLASS and REASON cells squeeze away.
	if !strings.HasPrefix(out, "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE VOLUMEMODE\n") ||
		!strings.Contains(out, "\npv-5g 5Gi RWO Delete Bound default/small <unset> ") || !strings.HasSuffix(out, " Filesystem") {
		t.Errorf("kubectl get pv -o wide:\n%s", out)
	}
	// A class without expansion (none at all) refuses the resize.
	msg := c.fails("patch", "pvc", "small", "-p", `{"spec":{"resources":{"requests":{"storage":"6Gi"}}}}`)
	if !strings.Contains(msg, `persistentvolumeclaims "small" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`) {
		t.Errorf("resize of a static claim: %s", msg)
	}
	// Delete of a static hostPath volume: upstream's deleter removes
	// paths under /tmp only; the other volume goes Failed.
	c.withStdin(claimManifest("srv", "", "1Gi", "ReadWriteOnce", "  volumeName: pv-srv"), "apply", "-f", "-")
	c.waitPhase("pvc", "srv", "Bound", 30*time.Second)
	c.must("delete", "pvc", "small", "srv")
	c.waitGone("pv", "pv-5g", 30*time.Second)
	if _, err := os.Stat(static); !os.IsNotExist(err) {
		t.Errorf("directory of the deleted static volume: %v", err)
	}
	c.waitPhase("pv", "pv-srv", "Failed", 30*time.Second)
	if got := c.jsonpath("pv", "pv-srv", "{.status.message}"); got != "host_path deleter only supports /tmp/.+ but received provided /srv/svcnet-e2e-not-created" {
		t.Errorf("message of the failed volume: %s", got)
	}

	// The shared class binds at once, for ReadWriteMany.
	c.withStdin(claimManifest("common", "shared", "1Gi", "ReadWriteMany", ""), "apply", "-f", "-")
	c.waitPhase("pvc", "common", "Bound", 30*time.Second)
	shared := c.jsonpath("pv", c.jsonpath("pvc", "common", "{.spec.volumeName}"), "{.spec.hostPath.path} {.spec.nodeAffinity}")
	if want := filepath.Join(c.dataDir, "shared-path-provisioner") + "/"; !strings.HasPrefix(shared, want) || strings.HasSuffix(shared, "}") {
		t.Errorf("shared volume %q, want a directory under %s and no node affinity", shared, want)
	}
	c.claimPod("one", "common", "echo from-one > /data/one; sleep 3600")
	c.claimPod("two", "common", "while ! cat /data/one; do sleep 1; done; sleep 3600")
	c.waitLog("two", "main", "from-one", 30*time.Second)

	// Bad input: upstream's 422s, and a class that does not exist.
	for _, tc := range []struct{ manifest, want string }{
		{claimManifest("bad", "-", "-1Gi", "ReadWriteOnce", ""),
			`The PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Invalid value: "-1Gi": must be greater than zero`},
		{claimManifest("bad", "-", "1Gi", "ReadWriteSometimes", ""),
			`The PersistentVolumeClaim "bad" is invalid: spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
	} {
		out, err := c.kubectl(tc.manifest, "apply", "-f", "-")
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("bad claim: %v\n%s\nwant %s", err, out, tc.want)
		}
	}
	c.must("get", "pvc", "big") // nothing else changed
	if _, err := c.kubectl("", "get", "pvc", "bad"); err == nil {
		t.Error("a refused claim was stored")
	}
	c.withStdin(claimManifest("nope", "nope", "1Gi", "ReadWriteOnce", ""), "apply", "-f", "-")
	c.waitClaimEvent("nope", "persistentvolume-controller", "ProvisioningFailed", `storageclass.storage.k8s.io "nope" not found`)
	if got := c.jsonpath("pvc", "nope", "{.status.phase}"); got != "Pending" {
		t.Errorf("claim of a missing class is %s", got)
	}
}

// TestPersistentVolumesTwoNodes runs on `svcnet up --nodes 2`: a shared
// ReadWriteMany claim mounted by a pod on each node, each pod seeing the
// other's writes; and a standard claim of a pod the scheduler places on
// the second node (by its hostname label), made by that node's
// provisioner, in its data dir, pinned to it.
func TestPersistentVolumesTwoNodes(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	prefix := fmt.Sprintf("pv%d", os.Getpid())
	c := startOnMachine(t, m, "--nodes", "2", "--node-name", prefix, "--disable", "ingress")
	nodes := [2]string{prefix + "-1", prefix + "-2"}
	podOn := func(name, node, claim, script string) {
		c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: [sh, -c, %q]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: %s}}
`, name, node, script, claim), "apply", "-f", "-")
	}

	c.withStdin(claimManifest("common", "shared", "1Gi", "ReadWriteMany", ""), "apply", "-f", "-")
	c.waitPhase("pvc", "common", "Bound", 60*time.Second)
	for i, node := range nodes {
		me, other := fmt.Sprint("pod", i+1), fmt.Sprint("pod", 2-i)
		podOn(me, node, "common", fmt.Sprintf("echo hello-from-%s > /data/%s; while ! cat /data/%s; do sleep 1; done; sleep 3600", me, me, other))
	}
	c.waitLog("pod1", "main", "hello-from-pod2", 60*time.Second)
	c.waitLog("pod2", "main", "hello-from-pod1", 60*time.Second)

	c.withStdin(claimManifest("local", "standard", "1Gi", "ReadWriteOnce", ""), "apply", "-f", "-")
	podOn("local-user", nodes[1], "local", "echo on-node-2 > /data/file; cat /data/file; sleep 3600")
	c.waitPhase("pvc", "local", "Bound", 60*time.Second)
	pv := c.jsonpath("pvc", "local", "{.spec.volumeName}")
	if got := c.jsonpath("pv", pv, "{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]} {.spec.hostPath.path}"); got != nodes[1]+" "+filepath.Join(defaultDataDir, "nodes", nodes[1], "local-path-provisioner", pv+"_default_local") {
		t.Errorf("volume of the second node: %s", got)
	}
	c.waitClaimEvent("local", "svcnet.io/local-path_"+nodes[1], "ProvisioningSucceeded", "Successfully provisioned volume "+pv)
	c.waitLog("local-user", "main", "on-node-2", 60*time.Second)
}

// statefulSetData is seed 003's StatefulSet with a claim template of the
// default class: each pod writes its name and a nonce to its own volume
// once, and prints what its volume holds at every start.
const statefulSetData = `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Retain, whenScaled: Delete}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: busybox
        command: [sh, -c, '[ -f /data/id ] || echo "$(hostname) $RANDOM$RANDOM" > /data/id; cat /data/id; sleep 3600']
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

// TestStatefulSetVolumes is seed 003's StatefulSet on a node: the claims
// data-web-0..2 of its template are provisioned and Bound, each pod keeps
// its own data across a rolling restart, a scale-down deletes the dropped
// pod's claim (whenScaled: Delete) and deleting the set keeps the others
// (whenDeleted: Retain).
func TestStatefulSetVolumes(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.withStdin(statefulSetData, "apply", "-f", "-")
	c.must("rollout", "status", "statefulset/web", "--timeout=120s")
	ids := map[string]string{}
	uids := map[string]string{}
	for i := range 3 {
		pod, claim := fmt.Sprint("web-", i), fmt.Sprint("data-web-", i)
		c.waitPhase("pvc", claim, "Bound", 30*time.Second)
		if got := c.jsonpath("pvc", claim, "{.spec.storageClassName} {.metadata.labels.app}"); got != "standard web" {
			t.Errorf("claim %s: class and label %q", claim, got)
		}
		id := strings.TrimSpace(c.must("exec", pod, "--", "cat", "/data/id"))
		if !strings.HasPrefix(id, pod+" ") {
			t.Errorf("%s's volume holds %q", pod, id)
		}
		ids[pod], uids[pod] = id, c.jsonpath("pod", pod, "{.metadata.uid}")
	}

	c.must("rollout", "restart", "statefulset/web")
	c.must("rollout", "status", "statefulset/web", "--timeout=120s")
	for pod, id := range ids {
		if uid := c.jsonpath("pod", pod, "{.metadata.uid}"); uid == uids[pod] {
			t.Errorf("%s was not replaced by the restart", pod)
		}
		c.waitLog(pod, "main", id, 30*time.Second)
		if got := strings.TrimSpace(c.must("exec", pod, "--", "cat", "/data/id")); got != id {
			t.Errorf("%s's volume after the restart holds %q, want %q", pod, got, id)
		}
	}

	// whenScaled: Delete takes web-2's claim with the pod.
	c.must("scale", "statefulset/web", "--replicas=2")
	c.waitGone("pod", "web-2", 60*time.Second)
	c.waitGone("pvc", "data-web-2", 60*time.Second)
	// whenDeleted: Retain keeps the rest.
	c.must("delete", "statefulset", "web")
	c.waitGone("pod", "web-0", 60*time.Second)
	c.waitGone("pod", "web-1", 60*time.Second)
	for _, claim := range []string{"data-web-0", "data-web-1"} {
		if got := c.jsonpath("pvc", claim, "{.status.phase} {.metadata.ownerReferences}"); got != "Bound " {
			t.Errorf("claim %s after the set's deletion: %q, want Bound and no owner", claim, got)
		}
	}
}
