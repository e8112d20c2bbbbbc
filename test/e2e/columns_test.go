package e2e

import (
	"strings"
	"testing"
)

// everyKind has one object of each served kind.
const everyKind = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: nginx}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: nginx, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: busybox}]}
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec: {containers: [{name: c, image: busybox, command: [sleep, "3600"]}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: manual}
subsets:
- addresses: [{ip: 10.0.0.1}, {ip: 10.0.0.2}]
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: manual-1, labels: {kubernetes.io/service-name: manual}}
addressType: IPv4
ports: [{name: "", port: 80, protocol: TCP}]
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/pv1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: svcnet.io/local
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: svcnet}
spec: {controller: svcnet.io/ingress}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: svcnet
  rules:
  - host: web.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: lock}
spec: {holderIdentity: me}
---
apiVersion: networking.k8s.io/v1
kind: IPAddress
metadata: {name: 10.96.0.200}
spec: {parentRef: {resource: services, namespace: default, name: web}}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: node-a}
spec:
  drivers:
  - {name: csi.example.com, nodeID: node-a}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: counts}
spec:
  hard: {configmaps: "10"}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: template}
template:
  metadata: {labels: {app: web}}
  spec:
    containers:
    - {name: web, image: nginx}
    - {name: log, image: busybox}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: gpu}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0}
`

// TestGetColumnsPerKind checks the header of `kubectl get` (and -o wide)
// for every kind against upstream's columns.
func TestGetColumnsPerKind(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.withStdin(everyKind, "apply", "-f", "-")
	cases := []struct{ kind, header, wide string }{
		{"deployments", "NAME READY UP-TO-DATE AVAILABLE AGE", "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"},
		{"replicasets", "NAME DESIRED CURRENT READY AGE", "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR"},
		{"statefulsets", "NAME READY AGE", "NAME READY AGE CONTAINERS IMAGES"},
		{"pods", "NAME READY STATUS RESTARTS AGE", "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"},
		{"services", "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE", "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR"},
		{"endpoints", "NAME ENDPOINTS AGE", "NAME ENDPOINTS AGE"},
		{"endpointslices", "NAME ADDRESSTYPE PORTS ENDPOINTS AGE", "NAME ADDRESSTYPE PORTS ENDPOINTS AGE"},
		{"serviceaccounts", "NAME SECRETS AGE", "NAME SECRETS AGE"},
		{"nodes", "NAME STATUS ROLES AGE VERSION", "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"},
		{"persistentvolumes", "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE", ""},
		{"persistentvolumeclaims", "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE", ""},
		{"storageclasses", "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE", ""},
		{"ingressclasses", "NAME CONTROLLER PARAMETERS AGE", ""},
		{"ingresses", "NAME CLASS HOSTS ADDRESS PORTS AGE", ""},
		{"leases", "NAME HOLDER AGE", ""},
		{"servicecidrs", "NAME CIDRS AGE", ""},
		{"ipaddresses", "NAME PARENTREF", ""},
		// The API server's own: its priority and fairness bootstrap
		// configuration and its group versions as Local APIServices.
		{"flowschemas", "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL", ""},
		{"prioritylevelconfigurations", "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE", ""},
		{"apiservices", "NAME SERVICE AVAILABLE AGE", ""},
		// The system priority classes the API server creates.
		{"priorityclasses", "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY", ""},
		{"csinodes", "NAME DRIVERS AGE", ""},
		{"resourcequotas", "NAME REQUEST LIMIT AGE", ""},
		{"podtemplates", "NAME CONTAINERS IMAGES POD LABELS", ""},
		{"deviceclasses", "NAME AGE", ""},
		{"resourceclaims", "NAME STATE AGE", ""},
		{"resourceslices", "NAME NODE DRIVER POOL AGE", ""},
	}
	for _, tc := range cases {
		out := c.must("get", tc.kind)
		if got := strings.Join(fields(strings.SplitN(out, "\n", 2)[0]), " "); got != tc.header {
			t.Errorf("get %s header %q, want %q\n%s", tc.kind, got, tc.header, out)
		}
		if tc.wide == "" {
			continue
		}
		out = c.must("get", tc.kind, "-o", "wide")
		if got := strings.Join(fields(strings.SplitN(out, "\n", 2)[0]), " "); got != tc.wide {
			t.Errorf("get %s -o wide header %q, want %q", tc.kind, got, tc.wide)
		}
	}
	// A few cells that carry upstream's formatting rules.
	checks := []struct {
		args []string
		name string
		col  int
		want string
	}{
		{[]string{"get", "svc"}, "web", 4, "80/TCP"},
		{[]string{"get", "ep"}, "manual", 1, "10.0.0.1:80,10.0.0.2:80"},
		{[]string{"get", "deploy"}, "web", 1, "0/2"},
		{[]string{"get", "sc"}, "local", 1, "(default)"},
		{[]string{"get", "ing"}, "web", 2, "web.example"},
		{[]string{"get", "pods"}, "one", 2, "Pending"},
		{[]string{"get", "nodes"}, "node-a", 1, "Unknown"},
		{[]string{"get", "pvc"}, "claim", 1, "Pending"},
		{[]string{"get", "servicecidr"}, "kubernetes", 1, "10.96.0.0/12"},
		{[]string{"get", "ip"}, "10.96.0.200", 1, "services/default/web"},
		{[]string{"get", "pc"}, "system-cluster-critical", 1, "2000000000"},
		{[]string{"get", "pc"}, "system-node-critical", 4, "PreemptLowerPriority"},
		{[]string{"get", "csinode"}, "node-a", 1, "1"},
		{[]string{"get", "podtemplates"}, "template", 2, "nginx,busybox"},
		{[]string{"get", "podtemplates"}, "template", 3, "app=web"},
		{[]string{"get", "resourceclaims"}, "gpu", 1, "pending"},
		{[]string{"get", "resourceslices"}, "node-a-gpus", 1, "node-a"},
	}
	for _, ck := range checks {
		_, row := tableRow(t, c.must(ck.args...), ck.name)
		if len(row) <= ck.col || row[ck.col] != ck.want {
			t.Errorf("%v row %s: %v, want column %d = %q", ck.args, ck.name, row, ck.col, ck.want)
		}
	}
}
