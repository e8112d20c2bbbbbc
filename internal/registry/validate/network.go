package validate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// protocols are the port protocols upstream supports, in the order its
// "supported values" lists print them.
var protocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

// Protocol checks a port protocol: required, and one of protocols.
func Protocol(p corev1.Protocol, path *field.Path) field.ErrorList {
	return oneOf(p, protocols, path)
}

// PortNumber checks a port number is within 1-65535.
func PortNumber(port int32, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(path, port, msg))
	}
	return errs
}

// PortNumOrName checks a port given as a number or as an IANA service name
// (a targetPort, a probe port).
func PortNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
	case intstr.String:
		errs = Invalid(path, port.StrVal, validation.IsValidPortName(port.StrVal))
	default:
		errs = append(errs, field.InternalError(path, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}

// ContainerPorts checks the ports of one container.
func ContainerPorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, port := range ports {
		p := path.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				errs = append(errs, Invalid(p.Child("name"), port.Name, msgs)...)
			} else if names[port.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names[port.Name] = true
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(p.Child("containerPort"), ""))
		} else {
			errs = append(errs, PortNumber(port.ContainerPort, p.Child("containerPort"))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, PortNumber(port.HostPort, p.Child("hostPort"))...)
		}
		errs = append(errs, Protocol(port.Protocol, p.Child("protocol"))...)
	}
	return errs
}

// IP checks an IP address in a field that has always accepted the lenient
// forms (leading zeros), as upstream's legacy-field validation does.
func IP(ip string, path *field.Path) field.ErrorList {
	return validation.IsValidIPForLegacyField(path, ip, false, nil)
}

// StrictIP checks an IP address as upstream's legacy fields do with
// StrictIPCIDRValidation on (the default since 1.36): no leading zeros, no
// IPv4-mapped IPv6, unless the value is one of old's (stored before).
func StrictIP(ip string, path *field.Path, old []string) field.ErrorList {
	return validation.IsValidIPForLegacyField(path, ip, true, old)
}

// NonSpecialIP rejects addresses that make no sense as a service or endpoint
// address: unspecified, loopback and link-local ones.
func NonSpecialIP(ip string, path *field.Path) field.ErrorList {
	parsed := netutils.ParseIPSloppy(ip)
	if parsed == nil {
		return field.ErrorList{field.Invalid(path, ip, "must be a valid IP address")}
	}
	var errs field.ErrorList
	if parsed.IsUnspecified() {
		errs = append(errs, field.Invalid(path, ip, fmt.Sprintf("may not be unspecified (%v)", ip)))
	}
	if parsed.IsLoopback() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if parsed.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if parsed.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(path, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}
