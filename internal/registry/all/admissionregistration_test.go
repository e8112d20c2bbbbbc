package all

import "testing"

func TestAdmissionRegistrationRegister(t *testing.T) {
	// resource: short names, categories, namespaced, status, generation, columns
	want := map[string]string{
		"admissionregistration.k8s.io/v1, Resource=validatingwebhookconfigurations":   "|api-extensions|false|false|true|Name,Webhooks,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingwebhookconfigurations":     "|api-extensions|false|false|true|Name,Webhooks,Age",
		"admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicies":       "|api-extensions|false|true|true|Name,Validations,ParamKind,Age",
		"admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicybindings": "|api-extensions|false|false|true|Name,PolicyName,ParamRef,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicies":         "|api-extensions|false|false|true|Name,Mutations,ParamKind,Age",
		"admissionregistration.k8s.io/v1, Resource=mutatingadmissionpolicybindings":   "|api-extensions|false|false|true|Name,PolicyName,ParamRef,Age",
	}
	checkRegistered(t, admissionregistration(Deps{}), want)
}
