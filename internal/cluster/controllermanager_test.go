package cluster

import "testing"

func TestControllersDisabledByDefault(t *testing.T) {
	for _, c := range []struct {
		controllers []string
		name        string
		want        bool
	}{
		{[]string{"*"}, "endpointslice-controller", true},
		{[]string{"*"}, "token-cleaner-controller", false},
		{[]string{"*"}, "bootstrap-signer-controller", false},
		{UpControllers, "token-cleaner-controller", true},
		{UpControllers, "bootstrap-signer-controller", true},
		{UpControllers, "endpointslice-controller", true},
		{[]string{"*", "-tokencleaner", "tokencleaner"}, "token-cleaner-controller", false},
	} {
		o := ControllerManagerOptions{Controllers: c.controllers}
		if got := o.Runs(c.name); got != c.want {
			t.Errorf("--controllers %v: runs %s = %v, want %v", c.controllers, c.name, got, c.want)
		}
	}
}
