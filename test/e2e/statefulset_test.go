package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// statefulSetWeb is upstream's StatefulSet tutorial example: a headless
// Service and a StatefulSet "web" of nginx pods, each with its own claim
// "www".
const statefulSetWeb = `apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels:
    app: nginx
spec:
  ports:
  - port: 80
    name: web
  clusterIP: None
  selector:
    app: nginx
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: "nginx"
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.24
        ports:
        - containerPort: 80
          name: web
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      resources:
        requests:
          storage: 1Gi
`

func TestStatefulSetWeb(t *testing.T) {
	t.Parallel()
	const ns = "sts-test"
	c := startCluster(t)
	c.createNamespace(ns)
	k := startFakeKubelet(t, c.clientset(), ns)
	k.hold()
	// The control plane alone has no provisioner: a volume of the default
	// class for each claim, which the scheduler pre-binds (the fake
	// kubelet mounts nothing).
	for i := range 3 {
		c.withStdin(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: sts-www-%d}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: standard
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/svcnet-e2e-sts-www-%d}
`, i, i), "apply", "-f", "-")
	}
	c.withStdin(statefulSetWeb, "apply", "-n", ns, "-f", "-")

	// stsField reads one field of the set's status.
	stsField := func(path string) string {
		return c.must("get", "sts", "web", "-n", ns, "-o", "jsonpath={"+path+"}")
	}
	podPhase := func(name string) string {
		out, _ := c.kubectl("", "get", "pod", name, "-n", ns, "-o", "jsonpath={.status.phase}")
		return out
	}
	// Each pod is created only once the one before it is Ready: with
	// web-<i> running but held not Ready, the controller has seen it
	// (status.replicas counts it) and made no web-<i+1>.
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		eventually(t, 30*time.Second, func() string {
			if phase := podPhase(name); phase != "Running" {
				return fmt.Sprintf("%s is %q, want Running", name, phase)
			}
			if got := stsField(".status.replicas"); got != fmt.Sprint(i+1) {
				return fmt.Sprintf("status.replicas %s, want %d", got, i+1)
			}
			return ""
		})
		if out := c.must("get", "pods", "-n", ns, "-o", "name"); strings.Contains(out, fmt.Sprintf("web-%d", i+1)) {
			t.Fatalf("web-%d exists before %s is Ready:\n%s", i+1, name, out)
		}
		k.readyOne(ns, name)
	}
	k.release()
	out := c.must("rollout", "status", "sts/web", "-n", ns, "--timeout=60s")
	if !strings.Contains(out, "partitioned roll out complete: 3 new pods have been updated") {
		t.Errorf("rollout status:\n%s", out)
	}

	// Stable identity: hostname and subdomain from the headless Service,
	// and a claim per pod.
	for i := range 3 {
		name := fmt.Sprintf("web-%d", i)
		got := c.must("get", "pod", name, "-n", ns, "-o",
			`jsonpath={.spec.hostname} {.spec.subdomain} {.metadata.labels.statefulset\.kubernetes\.io/pod-name} {.metadata.labels.apps\.kubernetes\.io/pod-index} {.spec.volumes[0].persistentVolumeClaim.claimName}`)
		if want := fmt.Sprintf("%s nginx %s %d www-%s", name, name, i, name); got != want {
			t.Errorf("pod %s: %q, want %q", name, got, want)
		}
	}
	if got := c.must("get", "pvc", "-n", ns, "-o", "name"); got != "persistentvolumeclaim/www-web-0\npersistentvolumeclaim/www-web-1\npersistentvolumeclaim/www-web-2\n" {
		t.Errorf("claims:\n%s", got)
	}

	// kubectl get sts: NAME READY AGE.
	table := strings.Split(strings.TrimSpace(c.must("get", "sts", "-n", ns)), "\n")
	if len(table) != 2 || strings.Join(strings.Fields(table[0]), " ") != "NAME READY AGE" || !strings.HasPrefix(strings.Join(strings.Fields(table[1]), " "), "web 3/3 ") {
		t.Errorf("kubectl get sts:\n%s", strings.Join(table, "\n"))
	}
	revision := stsField(".status.currentRevision")
	table = strings.Split(strings.TrimSpace(c.must("get", "controllerrevisions", "-n", ns)), "\n")
	if len(table) != 2 || strings.Join(strings.Fields(table[0]), " ") != "NAME CONTROLLER REVISION AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(table[1]), " "), revision+" statefulset.apps/web 1 ") {
		t.Errorf("kubectl get controllerrevisions (current revision %s):\n%s", revision, strings.Join(table, "\n"))
	}
	if out := c.must("explain", "controllerrevisions.revision"); !strings.Contains(out, "Revision indicates the revision of the state represented by Data.") {
		t.Errorf("kubectl explain controllerrevisions.revision:\n%s", out)
	}
	events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=StatefulSet,involvedObject.name=web")
	for _, want := range []string{"create Claim www-web-0 Pod web-0 in StatefulSet web success", "create Pod web-2 in StatefulSet web successful"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}

	// A new image with partition 1 updates web-2, then web-1; web-0 keeps
	// the old template.
	c.must("patch", "sts", "web", "-n", ns, "-p", `{"spec":{"updateStrategy":{"rollingUpdate":{"partition":1}}}}`)
	c.must("set", "image", "sts/web", "-n", ns, "nginx=registry.k8s.io/nginx-slim:0.27")
	out = c.must("rollout", "status", "sts/web", "-n", ns, "--timeout=60s")
	if !strings.Contains(out, "partitioned roll out complete: 2 new pods have been updated") {
		t.Errorf("rollout status with partition 1:\n%s", out)
	}
	images := c.must("get", "pods", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.containers[0].image} {end}`)
	if want := "web-0=registry.k8s.io/nginx-slim:0.24 web-1=registry.k8s.io/nginx-slim:0.27 web-2=registry.k8s.io/nginx-slim:0.27 "; images != want {
		t.Errorf("images %q, want %q", images, want)
	}
	if cur, upd := stsField(".status.currentRevision"), stsField(".status.updateRevision"); cur != revision || upd == revision {
		t.Errorf("current revision %s, update revision %s (was %s)", cur, upd, revision)
	}
	if out := c.must("rollout", "history", "sts/web", "-n", ns); !strings.Contains(out, "1 ") || !strings.Contains(out, "2 ") {
		t.Errorf("rollout history:\n%s", out)
	}

	// Scaling to 1 removes web-2, then (once it is gone) web-1.
	order := watchPodEnds(t, c, ns)
	c.must("scale", "sts", "web", "-n", ns, "--replicas=1")
	if got, want := strings.Join(order(4), ", "), "terminating web-2, deleted web-2, terminating web-1, deleted web-1"; got != want {
		t.Errorf("scale down: %s, want %s", got, want)
	}
	eventually(t, 30*time.Second, func() string {
		if got := stsField(".status.replicas") + " " + stsField(".status.readyReplicas"); got != "1 1" {
			return "status replicas/ready " + got
		}
		return ""
	})
	// Retain (the default) keeps the claims of the pods scaled away.
	if got := c.must("get", "pvc", "-n", ns, "-o", "name"); strings.Count(got, "www-web-") != 3 {
		t.Errorf("claims after scaling down:\n%s", got)
	}

	// rollout undo puts the first template back, which renumbers its
	// revision 3 and makes it the update revision again.
	c.must("rollout", "undo", "sts/web", "-n", ns, "--to-revision=1")
	eventually(t, 30*time.Second, func() string {
		number := c.must("get", "controllerrevision", revision, "-n", ns, "-o", "jsonpath={.revision}")
		if upd := stsField(".status.updateRevision"); number != "3" || upd != revision {
			return fmt.Sprintf("revision %s is number %s, update revision %s", revision, number, upd)
		}
		return ""
	})
	if image := stsField(".spec.template.spec.containers[0].image"); image != "registry.k8s.io/nginx-slim:0.24" {
		t.Errorf("image after rollout undo: %s", image)
	}
}

// watchPodEnds watches the namespace's pods and returns a function that
// waits for n ends of pods: "terminating <pod>" when a pod's deletion
// starts, "deleted <pod>" when it is gone.
func watchPodEnds(t *testing.T, c *cluster, ns string) func(n int) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := c.clientset().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	terminating := map[string]bool{}
	return func(n int) []string {
		var out []string
		timeout := time.After(60 * time.Second)
		for len(out) < n {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("pod watch ended after %v", out)
				}
				pod, isPod := e.Object.(*corev1.Pod)
				switch {
				case !isPod:
				case e.Type == watch.Deleted:
					out = append(out, "deleted "+pod.Name)
				case pod.DeletionTimestamp != nil && !terminating[pod.Name]:
					terminating[pod.Name] = true
					out = append(out, "terminating "+pod.Name)
				}
			case <-timeout:
				t.Fatalf("waited 60s for %d pod ends, saw %v", n, out)
			}
		}
		return out
	}
}
