#!/usr/bin/env bash
# Regenerates internal/openapi/generated/zz_generated.openapi.go, the OpenAPI
# schema definitions of the built-in Kubernetes types svcnet serves, with
# k8s.io/kube-openapi's openapi-gen.
#
# The generator runs at the kube-openapi version pinned in go.mod (via
# `go run module@version`, so go.mod gains no tool dependency) and reads the
# k8s.io/api and k8s.io/apimachinery versions pinned in go.mod, so the output is
# reproducible byte for byte from a given go.mod.
#
# Usage:
#   hack/update-openapi.sh           regenerate the committed file
#   hack/update-openapi.sh --verify  fail if the committed file is stale
#
# API rule violations (naming lints that upstream tracks in its own report
# file) are written to $OPENAPI_REPORT, /tmp/svcnet-openapi-violations.report
# by default; that report is not committed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

pkg_dir="internal/openapi/generated"
out_file="zz_generated.openapi.go"
report="${OPENAPI_REPORT:-/tmp/svcnet-openapi-violations.report}"

inputs=(
	k8s.io/api/core/v1
	k8s.io/api/admissionregistration/v1
	k8s.io/api/apps/v1
	k8s.io/api/autoscaling/v1
	k8s.io/api/autoscaling/v2
	k8s.io/api/batch/v1
	k8s.io/api/discovery/v1
	k8s.io/api/networking/v1
	k8s.io/api/node/v1
	k8s.io/api/events/v1
	k8s.io/api/storage/v1
	k8s.io/api/coordination/v1
	k8s.io/api/policy/v1
	k8s.io/api/rbac/v1
	k8s.io/api/authentication/v1
	k8s.io/api/authorization/v1
	k8s.io/api/certificates/v1
	k8s.io/api/flowcontrol/v1
	k8s.io/api/storagemigration/v1
	k8s.io/api/scheduling/v1
	k8s.io/api/scheduling/v1alpha3
	k8s.io/api/resource/v1
	k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1
	k8s.io/kube-aggregator/pkg/apis/apiregistration/v1
	k8s.io/apimachinery/pkg/apis/meta/v1
	k8s.io/apimachinery/pkg/runtime
	k8s.io/apimachinery/pkg/util/intstr
	k8s.io/apimachinery/pkg/api/resource
	k8s.io/apimachinery/pkg/version
)

module="$(go list -m -f '{{.Path}}')"
kube_openapi="$(go list -m -f '{{.Version}}' k8s.io/kube-openapi)"

verify=false
if [[ "${1:-}" == "--verify" ]]; then
	verify=true
fi

out_dir="${pkg_dir}"
if ${verify}; then
	out_dir="$(mktemp -d)"
	trap 'rm -rf "${out_dir}"' EXIT
fi

go run "k8s.io/kube-openapi/cmd/openapi-gen@${kube_openapi}" \
	--output-dir "${out_dir}" \
	--output-pkg "${module}/${pkg_dir}" \
	--output-file "${out_file}" \
	--report-filename "${report}" \
	"${inputs[@]}"

if ${verify}; then
	if ! diff -q "${out_dir}/${out_file}" "${pkg_dir}/${out_file}" >/dev/null; then
		echo "${pkg_dir}/${out_file} is out of date; run hack/update-openapi.sh" >&2
		exit 1
	fi
	echo "${pkg_dir}/${out_file} is up to date"
else
	echo "wrote ${pkg_dir}/${out_file} (API rule violations: ${report})"
fi
