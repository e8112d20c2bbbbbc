package validatingwebhookconfiguration

import (
	"strconv"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// webhook is a valid webhook calling a service, before defaulting.
func webhook(name string) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name: name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: "deny", Path: ptr.To("/validate")},
		},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func valid() *admissionregistrationv1.ValidatingWebhookConfiguration {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-configmaps"},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{webhook("deny.example.com")},
	}
	strategy{}.Default(c)
	return c
}

func TestDefault(t *testing.T) {
	in := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{webhook("deny.example.com")}}
	want := in.DeepCopy()
	h := &want.Webhooks[0]
	h.FailurePolicy = ptr.To(admissionregistrationv1.Fail)
	h.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	h.NamespaceSelector = &metav1.LabelSelector{}
	h.ObjectSelector = &metav1.LabelSelector{}
	h.TimeoutSeconds = ptr.To[int32](10)
	h.ClientConfig.Service.Port = ptr.To[int32](443)
	h.Rules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)

	set := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{webhook("deny.example.com")}}
	s := &set.Webhooks[0]
	s.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	s.MatchPolicy = ptr.To(admissionregistrationv1.Exact)
	s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	s.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"c": "d"}}
	s.TimeoutSeconds = ptr.To[int32](5)
	s.ClientConfig.Service.Port = ptr.To[int32](8443)
	s.Rules[0].Scope = ptr.To(admissionregistrationv1.NamespacedScope)

	url := &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{
		Name: "url.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://example.com/v")}}}}
	wantURL := url.DeepCopy()
	u := &wantURL.Webhooks[0]
	u.FailurePolicy, u.MatchPolicy = ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.Equivalent)
	u.NamespaceSelector, u.ObjectSelector, u.TimeoutSeconds = &metav1.LabelSelector{}, &metav1.LabelSelector{}, ptr.To[int32](10)

	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*admissionregistrationv1.ValidatingWebhookConfiguration]{
		{Name: "unset", In: in, Want: want},
		{Name: "set", In: set, Want: set.DeepCopy()},
		{Name: "url, no rules", In: url, Want: wantURL},
		{Name: "no webhooks", In: &admissionregistrationv1.ValidatingWebhookConfiguration{}, Want: &admissionregistrationv1.ValidatingWebhookConfiguration{}},
	})
}

func TestValidate(t *testing.T) {
	type c = *admissionregistrationv1.ValidatingWebhookConfiguration
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[c]{
		{Name: "valid", Change: func(c) {}},
		{Name: "url", Change: func(c c) {
			c.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://webhook.example.com:8443/validate")}
		}},
		{Name: "no webhooks", Change: func(c c) { c.Webhooks = nil }},
		{Name: "two segment name", Change: func(c c) { c.Webhooks[0].Name = "example.com" }, Want: []string{
			`webhooks[0].name: Invalid value: "example.com": should be a domain with at least three segments separated by dots`,
		}},
		{Name: "no name", Change: func(c c) { c.Webhooks[0].Name = "" }, Want: []string{
			"webhooks[0].name: Required value",
		}},
		{Name: "duplicate names", Change: func(c c) { c.Webhooks = append(c.Webhooks, c.Webhooks[0]) }, Want: []string{
			`webhooks[1].name: Duplicate value: "deny.example.com"`,
		}},
		{Name: "side effects", Change: func(c c) {
			c.Webhooks[0].SideEffects = nil
			c.Webhooks = append(c.Webhooks, c.Webhooks[0])
			c.Webhooks[1].Name = "other.example.com"
			c.Webhooks[1].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, Want: []string{
			"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
			`webhooks[1].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`,
		}},
		{Name: "admission review versions", Change: func(c c) {
			c.Webhooks[0].AdmissionReviewVersions = nil
			c.Webhooks = append(c.Webhooks, c.Webhooks[0])
			c.Webhooks[1].Name = "other.example.com"
			c.Webhooks[1].AdmissionReviewVersions = []string{"v2", "v2", "V3"}
		}, Want: []string{
			"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
			`webhooks[1].admissionReviewVersions[1]: Invalid value: "v2": duplicate version`,
			`webhooks[1].admissionReviewVersions[2]: Invalid value: "V3": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`,
			`webhooks[1].admissionReviewVersions: Invalid value: ["v2","v2","V3"]: must include at least one of v1, v1beta1`,
		}},
		{Name: "policies and timeout", Change: func(c c) {
			h := &c.Webhooks[0]
			h.FailurePolicy = ptr.To(admissionregistrationv1.FailurePolicyType("Maybe"))
			h.MatchPolicy = ptr.To(admissionregistrationv1.MatchPolicyType("Loose"))
			h.TimeoutSeconds = ptr.To[int32](31)
		}, Want: []string{
			`webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore"`,
			`webhooks[0].matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"`,
			"webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
		}},
		{Name: "bad selector value", Change: func(c c) {
			c.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b c"}}
		}, Want: []string{
			`webhooks[0].objectSelector.matchLabels: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		}},
		{Name: "url and service", Change: func(c c) { c.Webhooks[0].ClientConfig.URL = ptr.To("https://example.com") }, Want: []string{
			"webhooks[0].clientConfig: Required value: exactly one of url or service is required",
		}},
		{Name: "neither url nor service", Change: func(c c) { c.Webhooks[0].ClientConfig.Service = nil }, Want: []string{
			"webhooks[0].clientConfig: Required value: exactly one of url or service is required",
		}},
		{Name: "http url with user, query and fragment", Change: func(c c) {
			c.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("http://me@example.com/v?a=b#top")}
		}, Want: []string{
			`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`,
			`webhooks[0].clientConfig.url: Invalid value: "me": user information is not permitted in the URL`,
			`webhooks[0].clientConfig.url: Invalid value: "top": fragments are not permitted in the URL`,
			`webhooks[0].clientConfig.url: Invalid value: "a=b": query parameters are not permitted in the URL`,
		}},
		{Name: "url without host", Change: func(c c) {
			c.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https:///v")}
		}, Want: []string{
			`webhooks[0].clientConfig.url: Invalid value: "": host must be specified; desired format: https://host[/path]`,
		}},
		{Name: "unparsable url", Change: func(c c) {
			c.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://exa mple.com")}
		}, Want: []string{
			`webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse "https://exa mple.com": invalid character " " in host name; desired format: https://host[/path]`,
		}},
		{Name: "service", Change: func(c c) {
			c.Webhooks[0].ClientConfig.Service = &admissionregistrationv1.ServiceReference{Port: ptr.To[int32](0), Path: ptr.To("validate//Now/")}
		}, Want: []string{
			"webhooks[0].clientConfig.service.name: Required value",
			"webhooks[0].clientConfig.service.namespace: Required value",
			"webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
			`webhooks[0].clientConfig.service.path: Invalid value: "validate//Now/": must start with a '/'`,
			`webhooks[0].clientConfig.service.path: Invalid value: "validate//Now/": segment[1] may not be empty`,
			`webhooks[0].clientConfig.service.path: Invalid value: "validate//Now/": segment[2]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{Name: "service path //", Change: func(c c) { c.Webhooks[0].ClientConfig.Service.Path = ptr.To("//") }, Want: []string{
			`webhooks[0].clientConfig.service.path: Invalid value: "//": segment[0] may not be empty`,
		}},
		{Name: "rules", Change: func(c c) {
			c.Webhooks[0].Rules = []admissionregistrationv1.RuleWithOperations{
				{},
				{
					Operations: []admissionregistrationv1.OperationType{"*", "PATCH"},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"*", "apps"}, APIVersions: []string{"*", ""},
						Resources: []string{"*/*", "pods"}, Scope: ptr.To(admissionregistrationv1.ScopeType("Global"))},
				},
			}
		}, Want: []string{
			"webhooks[0].rules[0].operations: Required value",
			"webhooks[0].rules[0].apiGroups: Required value",
			"webhooks[0].rules[0].apiVersions: Required value",
			"webhooks[0].rules[0].resources: Required value",
			`webhooks[0].rules[1].operations: Invalid value: ["*","PATCH"]: if '*' is present, must not specify other operations`,
			`webhooks[0].rules[1].operations[1]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"`,
			`webhooks[0].rules[1].apiGroups: Invalid value: ["*","apps"]: if '*' is present, must not specify other API groups`,
			`webhooks[0].rules[1].apiVersions: Invalid value: ["*",""]: if '*' is present, must not specify other API versions`,
			"webhooks[0].rules[1].apiVersions[1]: Required value",
			`webhooks[0].rules[1].resources: Invalid value: ["*/*","pods"]: if '*/*' is present, must not specify other resources`,
			`webhooks[0].rules[1].scope: Unsupported value: "Global": supported values: "*", "Cluster", "Namespaced"`,
		}},
		{Name: "resource wildcards", Change: func(c c) {
			c.Webhooks[0].Rules[0].Resources = []string{"pods/*", "pods/log", "*/status", "deployments/status", "*", "services"}
		}, Want: []string{
			`webhooks[0].rules[0].resources[1]: Invalid value: "pods/log": if 'pods/*' is present, must not specify pods/log`,
			`webhooks[0].rules[0].resources[3]: Invalid value: "deployments/status": if '*/status' is present, must not specify deployments/status`,
			`webhooks[0].rules[0].resources: Invalid value: ["pods/*","pods/log","*/status","deployments/status","*","services"]: if '*' is present, must not specify other resources without subresources`,
		}},
		{Name: "resource wildcard last", Change: func(c c) {
			// Upstream remembers only the last plain resource, so "*"
			// after "services" passes.
			c.Webhooks[0].Rules[0].Resources = []string{"services", "*", "pods/status"}
		}},
		{Name: "match conditions", Change: func(c c) {
			c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{
				{Name: "not-kube-system", Expression: "request.namespace != 'kube-system'"},
				{Name: "not-kube-system", Expression: "  "},
				{Name: "Bad Name", Expression: "request.name"},
				{Expression: "nope("},
			}
		}, Want: []string{
			"webhooks[0].matchConditions[1].expression: Required value",
			`webhooks[0].matchConditions[1].name: Duplicate value: "not-kube-system"`,
			`webhooks[0].matchConditions[2].expression: Invalid value: "request.name": must evaluate to bool but got string`,
			`webhooks[0].matchConditions[2].name: Invalid value: "Bad Name": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			"webhooks[0].matchConditions[3].expression: Invalid value: \"nope(\": compilation failed: ERROR: <input>:1:6: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | nope(\n | .....^",
			"webhooks[0].matchConditions[3].name: Required value",
		}},
		{Name: "too many match conditions", Change: func(c c) {
			for i := range 65 {
				c.Webhooks[0].MatchConditions = append(c.Webhooks[0].MatchConditions,
					admissionregistrationv1.MatchCondition{Name: "c" + strconv.Itoa(i), Expression: "true"})
			}
		}, Want: []string{
			"webhooks[0].matchConditions: Too many: 65: must have at most 64 items",
		}},
		{Name: "static name", Change: func(c c) { c.Name = "deny.static.k8s.io" }, Want: []string{
			`metadata.name: Invalid value: "deny.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	type c = *admissionregistrationv1.ValidatingWebhookConfiguration
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[c]{
		{Name: "unchanged", Change: func(c) {}},
		{Name: "static name kept", Old: func(c c) { c.Name = "deny.static.k8s.io" }, Change: func(c) {}},
		{Name: "new side effects refused", Change: func(c c) {
			c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassUnknown)
		}, Want: []string{
			`webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"`,
		}},
		{Name: "stored side effects kept", Old: func(c c) {
			c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, Change: func(c c) { c.Webhooks[0].TimeoutSeconds = ptr.To[int32](5) }},
		{Name: "stored side effects still must be known", Old: func(c c) {
			c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
		}, Change: func(c c) { c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClass("Many")) }, Want: []string{
			`webhooks[0].sideEffects: Unsupported value: "Many": supported values: "None", "NoneOnDryRun", "Some", "Unknown"`,
		}},
		{Name: "stored duplicate names kept", Old: func(c c) { c.Webhooks = append(c.Webhooks, c.Webhooks[0]) }, Change: func(c) {}},
		{Name: "stored unknown review version kept", Old: func(c c) { c.Webhooks[0].AdmissionReviewVersions = []string{"v2"} }, Change: func(c) {}},
		{Name: "stored invalid selector value kept", Old: func(c c) {
			c.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}}}}
		}, Change: func(c) {}},
		{Name: "new invalid selector value refused", Change: func(c c) {
			c.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b c"}}}}
		}, Want: []string{
			`webhooks[0].namespaceSelector.matchExpressions[0].values[0]: Invalid value: "b c": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		}},
		{Name: "unchanged bad match condition skipped", Old: func(c c) {
			c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "n", Expression: "1"}}
		}, Change: func(c c) { c.Webhooks[0].TimeoutSeconds = ptr.To[int32](5) }},
		{Name: "changed match conditions checked", Old: func(c c) {
			c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "n", Expression: "1"}}
		}, Change: func(c c) {
			c.Webhooks[0].MatchConditions = append(c.Webhooks[0].MatchConditions, admissionregistrationv1.MatchCondition{Name: "m", Expression: "true"})
		}, Want: []string{
			`webhooks[0].matchConditions[0].expression: Invalid value: "1": must evaluate to bool but got int`,
		}},
	})
}

func TestColumns(t *testing.T) {
	c := valid()
	c.Webhooks = append(c.Webhooks, webhook("other.example.com"))
	registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "Webhooks", "Age"},
		[]interface{}{"deny-configmaps", int64(2), "<unknown>"})
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "validatingwebhookconfigurations" || r.Namespaced || r.Status || !r.Generation ||
		r.Kind.String() != "admissionregistration.k8s.io/v1, Kind=ValidatingWebhookConfiguration" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
