package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	svccluster "github.com/svcnet/svcnet/internal/cluster"
)

// boundPair makes a PV and a claim bound to each other from the start
// (claimRef and volumeName both set), with extra PV spec lines.
func (c *nodeCluster) boundPair(pv, claim, mode, pvSpec string) {
	c.t.Helper()
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [%[3]s]
  claimRef: {namespace: default, name: %[2]s}
%[4]s---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[2]s}
spec:
  accessModes: [%[3]s]
  storageClassName: ""
  volumeName: %[1]s
  resources: {requests: {storage: 1Gi}}
`, pv, claim, mode, pvSpec), "apply", "-f", "-")
	c.waitPhase("pvc", claim, "Bound", 30*time.Second)
}

// scheduledPod applies a pod for the scheduler to place, with extra
// container and pod spec lines.
func (c *nodeCluster) scheduledPod(name, extra string) {
	c.t.Helper()
	c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
%s`, name, extra), "apply", "-f", "-")
}

// podEvents are the messages of a pod's events of one reason.
func (c *nodeCluster) podEvents(pod, reason string) string {
	out, _ := c.kubectl("", "get", "events", "--field-selector", "involvedObject.name="+pod+",reason="+reason, "-o", "jsonpath={.items[*].message}")
	return out
}

func (c *nodeCluster) waitPodEvent(pod, reason, want string) {
	c.t.Helper()
	eventually(c.t, 30*time.Second, func() string {
		if ev := c.podEvents(pod, reason); !strings.Contains(ev, want) {
			return fmt.Sprintf("%s events of %s: %q, want %q", reason, pod, ev, want)
		}
		return ""
	})
}

// TestVolumeBindingFirstConsumer: a WaitForFirstConsumer claim and a pod
// that uses it. The scheduler pre-binds the static PV that fits the
// node (not the one whose node affinity names another node) and binds
// the pod once the claim is bound; the pod mounts it with subPath,
// readOnly and its fsGroup; /stats/summary shows the claim's volume. A
// bound claim whose PV is on no node keeps its pod Pending with
// upstream's reason, and so does a ReadWriteOncePod claim that a running
// pod holds.
func TestVolumeBindingFirstConsumer(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	here, far := t.TempDir(), t.TempDir()
	c.withStdin(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-e2e}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-far}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local-e2e
  local: {path: %[2]s}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [elsewhere]}]}]}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-here}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local-e2e
  local: {path: %[1]s}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%[3]s]}]}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local-e2e
  resources: {requests: {storage: 2Gi}}
`, here, far, nodeName), "apply", "-f", "-")
	c.waitPhase("pv", "pv-far", "Available", 30*time.Second)
	c.waitPhase("pv", "pv-here", "Available", 30*time.Second)
	if err := os.MkdirAll(filepath.Join(here, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.scheduledPod("consumer", `  securityContext: {fsGroup: 2000}
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'id -G; stat -c "data-gid=%g" /data; echo hi > /data/new; stat -c "new-gid=%g" /data/new; echo sub > /sub/x; touch /ro/y 2>/dev/null || echo ro-denied; sleep 3600']
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: data, mountPath: /sub, subPath: sub/dir}
    - {name: data, mountPath: /ro, readOnly: true}
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data}}
`)
	eventually(t, 20*time.Second, func() string {
		if got := c.jsonpath("pv", "pv-here", `{.spec.claimRef.name} {.metadata.annotations.pv\.kubernetes\.io/bound-by-controller}`); got != "data yes" {
			return "pv-here not pre-bound to data: " + got
		}
		return ""
	})
	if got := c.jsonpath("pv", "pv-far", "{.spec.claimRef}"); got != "" {
		t.Errorf("pv-far, on another node, was taken: %s", got)
	}
	c.waitReady("consumer", "True", 30*time.Second)
	// The pod is bound once its claim is (the scheduler's PreBind waits
	// for the PV controller): not before, to the second.
	if bound, placed := c.jsonpath("pv", "pv-here", "{.status.lastPhaseTransitionTime}"),
		c.jsonpath("pod", "consumer", `{.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime}`); placed < bound {
		t.Errorf("consumer placed at %s, before its claim's volume was bound at %s", placed, bound)
	}
	if got := c.jsonpath("pod", "consumer", "{.spec.nodeName}"); got != nodeName {
		t.Errorf("consumer on %q, want %s", got, nodeName)
	}
	c.waitLog("consumer", "main", "ro-denied", 10*time.Second)
	logs := c.must("logs", "consumer")
	for _, want := range []string{"data-gid=2000\n", "new-gid=2000\n", "ro-denied\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if groups := strings.Fields(strings.SplitN(logs, "\n", 2)[0]); !strings.Contains(" "+strings.Join(groups, " ")+" ", " 2000 ") {
		t.Errorf("the container's groups %v lack the fsGroup 2000", groups)
	}
	if b, err := os.ReadFile(filepath.Join(here, "sub", "dir", "x")); err != nil || string(b) != "sub\n" {
		t.Errorf("the subPath write reached the volume as %q (%v)", b, err)
	}
	if _, err := os.Stat(filepath.Join(here, "y")); err == nil {
		t.Error("a write through the read-only mount reached the volume")
	}
	if info, err := os.Stat(here); err != nil || info.Mode()&os.ModeSetgid == 0 {
		t.Errorf("the volume's root is not setgid for the fsGroup: %v %v", info.Mode(), err)
	}
	if got := c.jsonpath("node", nodeName, "{.status.volumesAttached[*].name}"); got != "kubernetes.io/local-volume/pv-here" {
		t.Errorf("node's volumesAttached: %q", got)
	}

	// The claim's volume in the node's /stats/summary.
	vol := c.summaryVolume("consumer", "data")
	if vol.PVCRef == nil || vol.PVCRef.Name != "data" || vol.PVCRef.Namespace != "default" ||
		vol.CapacityBytes == nil || *vol.CapacityBytes == 0 || vol.AvailableBytes == nil ||
		vol.UsedBytes == nil || *vol.UsedBytes == 0 || vol.InodesUsed == nil || *vol.InodesUsed < 4 || vol.Inodes == nil {
		t.Errorf("summary of volume data: %+v", vol)
	}

	// A bound claim whose PV's node affinity names another node.
	c.boundPair("pv-elsewhere", "elsewhere", "ReadWriteOnce", fmt.Sprintf(`  local: {path: %s}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [elsewhere]}]}]}}
`, far))
	c.scheduledPod("stranded", `  containers: [{name: main, image: busybox, command: [sleep, "3600"], volumeMounts: [{name: v, mountPath: /v}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: elsewhere}}]
`)
	c.waitPodEvent("stranded", "FailedScheduling", "0/1 nodes are available: 1 node(s) had volume node affinity conflict. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")

	// A claim that does not exist.
	c.scheduledPod("orphan", `  containers: [{name: main, image: busybox, command: [sleep, "3600"], volumeMounts: [{name: v, mountPath: /v}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: missing}}]
`)
	c.waitPodEvent("orphan", "FailedScheduling", `0/1 nodes are available: persistentvolumeclaim "missing" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`)

	// ReadWriteOncePod: one pod at a time.
	c.boundPair("pv-solo", "solo", "ReadWriteOncePod", fmt.Sprintf("  hostPath: {path: %s}\n", t.TempDir()))
	solo := `  containers: [{name: main, image: busybox, command: [sleep, "3600"], volumeMounts: [{name: v, mountPath: /v}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: solo}}]
`
	c.scheduledPod("solo-1", solo)
	c.waitReady("solo-1", "True", 30*time.Second)
	c.scheduledPod("solo-2", solo)
	c.waitPodEvent("solo-2", "FailedScheduling", "0/1 nodes are available: 1 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
	c.must("delete", "pod", "solo-1", "--wait=false")
	c.waitReady("solo-2", "True", 60*time.Second)
}

// summaryVolume is a pod's volume in the node's /stats/summary, asked
// for on the node agent's port with the API server's client certificate.
func (c *nodeCluster) summaryVolume(pod, volume string) statsapi.VolumeStats {
	c.t.Helper()
	tlsCfg, err := svccluster.KubeletClientTLS(c.dataDir)
	if err != nil {
		c.t.Fatal(err)
	}
	tlsCfg.InsecureSkipVerify = true // loopback, the node's own serving certificate
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
	port := c.jsonpath("node", nodeName, "{.status.daemonEndpoints.kubeletEndpoint.Port}")
	var found statsapi.VolumeStats
	eventually(c.t, 20*time.Second, func() string {
		resp, err := client.Get("https://127.0.0.1:" + port + "/stats/summary")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var sum statsapi.Summary
		if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
			return fmt.Sprintf("decode /stats/summary (%s): %v", resp.Status, err)
		}
		for _, p := range sum.Pods {
			for _, v := range p.VolumeStats {
				if p.PodRef.Name == pod && v.Name == volume {
					found = v
					return ""
				}
			}
		}
		return fmt.Sprintf("/stats/summary has no volume %s of pod %s: %+v", volume, pod, sum.Pods)
	})
	return found
}

// TestVolumeMultiAttach: on `svcnet up --nodes 2`, a ReadWriteOnce claim
// used by a pod on each node: the second pod waits with upstream's
// Multi-Attach event until the first is gone, then runs; a second pod on
// the first node shares the volume at once.
func TestVolumeMultiAttach(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	base := fmt.Sprintf("e2evol%d", os.Getpid())
	c := startOnMachine(t, m, "--nodes", "2", "--node-name", base, "--disable", "ingress")
	first, second := base+"-1", base+"-2"
	c.boundPair("disk", "disk", "ReadWriteOnce", fmt.Sprintf("  hostPath: {path: %s}\n", t.TempDir()))
	on := func(node string) string {
		return fmt.Sprintf(`  nodeSelector: {kubernetes.io/hostname: %s}
  containers: [{name: main, image: busybox, command: [sleep, "3600"], volumeMounts: [{name: v, mountPath: /v}]}]
  volumes: [{name: v, persistentVolumeClaim: {claimName: disk}}]
`, node)
	}
	c.scheduledPod("writer", on(first))
	c.waitReady("writer", "True", 30*time.Second)
	c.scheduledPod("reader", on(second))
	c.waitPodEvent("reader", "FailedAttachVolume", `Multi-Attach error for volume "disk" Volume is already used by pod(s) writer`)
	c.scheduledPod("neighbour", on(first))
	c.waitReady("neighbour", "True", 30*time.Second)
	if got := c.jsonpath("pod", "reader", "{.status.containerStatuses[0].state.waiting.reason}"); got != "ContainerCreating" {
		t.Errorf("reader waits for %q, want ContainerCreating", got)
	}
	if got := c.must("get", "events", "--field-selector", "involvedObject.name=reader,reason=FailedAttachVolume", "-o", "jsonpath={.items[0].source.component}"); got != "attachdetach-controller" {
		t.Errorf("Multi-Attach event from %q", got)
	}
	c.must("delete", "pod", "writer", "neighbour", "--wait=false")
	c.waitReady("reader", "True", 60*time.Second)
	if got := c.jsonpath("node", second, "{.status.volumesAttached[*].name}"); got != "kubernetes.io/host-path/disk" {
		t.Errorf("%s's volumesAttached: %q", second, got)
	}
}
