#!/usr/bin/env bash
# Copies the CustomResourceDefinitions svcnet installs into internal/crds,
# unchanged, from the modules that define those APIs at the versions go.mod
# requires: MetalLB's metallb.io kinds (go.universe.tf/metallb,
# config/crd/bases) and the Gateway API kinds svcnet serves from its
# standard channel (sigs.k8s.io/gateway-api, config/crd/standard).
#
# Usage:
#   hack/update-crds.sh           copy them again (after a go.mod bump)
#   hack/update-crds.sh --verify  fail if a committed file differs
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

verify=false
[ "${1:-}" = --verify ] && verify=true

# copy MODULE SRC_DIR DEST_DIR FILE...
copy() {
	local module=$1 src=$2 dest=internal/crds/$3
	shift 3
	local dir
	dir=$(go mod download -json "${module}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -n "${dir}" ] || { echo "module ${module} has no directory" >&2; exit 1; }
	if ${verify}; then
		local want
		want=$(printf '%s\n' "$@" | sort)
		if [ "$(cd "${dest}" && ls -1 | sort)" != "${want}" ]; then
			echo "${dest} does not hold exactly: $*" >&2
			exit 1
		fi
	else
		rm -rf "${dest}"
		mkdir -p "${dest}"
	fi
	for f in "$@"; do
		if ${verify}; then
			cmp -s "${dir}/${src}/${f}" "${dest}/${f}" || {
				echo "${dest}/${f} differs from ${module}; run hack/update-crds.sh" >&2
				exit 1
			}
		else
			install -m 0644 "${dir}/${src}/${f}" "${dest}/${f}"
		fi
	done
}

metallb=go.universe.tf/metallb@$(go list -m -f '{{.Version}}' go.universe.tf/metallb)
gateway=sigs.k8s.io/gateway-api@$(go list -m -f '{{.Version}}' sigs.k8s.io/gateway-api)

copy "${metallb}" config/crd/bases metallb \
	metallb.io_bfdprofiles.yaml metallb.io_bgpadvertisements.yaml metallb.io_bgppeers.yaml \
	metallb.io_communities.yaml metallb.io_configurationstates.yaml metallb.io_ipaddresspools.yaml \
	metallb.io_l2advertisements.yaml metallb.io_servicebgpstatuses.yaml metallb.io_servicel2statuses.yaml
copy "${gateway}" config/crd/standard gateway-api \
	gateway.networking.k8s.io_gatewayclasses.yaml gateway.networking.k8s.io_gateways.yaml \
	gateway.networking.k8s.io_httproutes.yaml gateway.networking.k8s.io_referencegrants.yaml
