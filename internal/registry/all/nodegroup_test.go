package all

import "testing"

func TestNodeGroupRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"node.k8s.io/v1, Resource=runtimeclasses": "||false|false|false|Name,Handler,Age",
	}
	checkRegistered(t, nodeGroup(), want)
}
