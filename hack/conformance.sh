#!/usr/bin/env bash
# conformance.sh builds upstream's e2e suite (k8s.io/kubernetes test/e2e at
# the version of k8s.io/api in go.mod) and runs a focus set of it against a
# fresh `svcnet up` inside a network namespace of its own, so that every
# packet of the run stays in that namespace. See docs/conformance.md.
#
#   hack/conformance.sh build
#   hack/conformance.sh run [-n NODES] [-p PROCS] FOCUS [SKIP]
#
# The suite (ginkgo wants its name to end in .test), ginkgo and each run's report live under $SVCNET_CONFORMANCE_DIR
# (default /var/tmp/svcnet-conformance). `run` needs root and builds the
# suite first when it is missing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${SVCNET_CONFORMANCE_DIR:-/var/tmp/svcnet-conformance}

usage() {
	sed -n '2,12s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

# version prints the Kubernetes version matching k8s.io/api in go.mod
# (v0.37.2 -> v1.37.2).
version() {
	local api
	api=$(awk '$1 == "k8s.io/api" {print $2; exit}' "$repo/go.mod")
	echo "v1${api#v0}"
}

build() {
	local v src
	v=$(version)
	src=$dir/src-$v
	# The suite reads its own version (pod security fixtures are chosen by
	# it), which upstream's build stamps in as kube's hack/lib/version.sh
	# does; a suite built without the stamp is built again.
	local minor=${v#v1.}
	minor=${minor%%.*}
	local ldflags="-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitTreeState=clean"
	if [[ -x $dir/e2e-$v.test && -x $dir/ginkgo-$v && $(cat "$dir/e2e-$v.ldflags" 2>/dev/null) == "$ldflags" ]]; then
		return
	fi
	mkdir -p "$src"
	cd "$src"
	# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
	# them with its own tree; a module outside that tree pins each one to
	# the matching published version instead.
	local gomod staging
	gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
	staging=$(sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$gomod")
	{
		echo "module svcnet.local/conformance"
		echo
		echo "go 1.25"
		echo
		echo "require k8s.io/kubernetes $v"
		echo
		echo "replace ("
		for m in $staging; do
			echo "	$m => $m v0${v#v1}"
		done
		echo ")"
	} >go.mod
	cat >tools.go <<-'EOF'
		//go:build tools

		// Package conformance only pins upstream's e2e suite and ginkgo.
		package conformance

		import (
			_ "github.com/onsi/ginkgo/v2/ginkgo"
			_ "k8s.io/kubernetes/test/e2e"
		)
	EOF
	go mod tidy
	go test -c -ldflags "$ldflags" -o "$dir/e2e-$v.test" k8s.io/kubernetes/test/e2e
	echo "$ldflags" >"$dir/e2e-$v.ldflags"
	go build -o "$dir/ginkgo-$v" github.com/onsi/ginkgo/v2/ginkgo
}

ns=
pid=
data=
cleanup() {
	if [[ -n $pid ]]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [[ -n $ns ]]; then
		ip netns del "$ns" 2>/dev/null || true
	fi
	if [[ -n $data ]]; then
		rm -rf "$data"
	fi
}

run() {
	local nodes=2 procs=2
	while getopts "n:p:" o; do
		case $o in
		n) nodes=$OPTARG ;;
		p) procs=$OPTARG ;;
		*) usage ;;
		esac
	done
	shift $((OPTIND - 1))
	[[ $# -ge 1 ]] || usage
	local focus=$1 skip=${2:-}
	[[ $(id -u) == 0 ]] || {
		echo "conformance.sh run needs root: the cluster runs in a network namespace" >&2
		exit 1
	}
	build
	local v stamp report
	v=$(version)
	stamp=$(date +%Y%m%d-%H%M%S)
	report=$dir/report-$stamp
	mkdir -p "$report"
	(cd "$repo" && go build -o "$dir/svcnet" ./cmd/svcnet)

	trap cleanup EXIT
	# The cluster's namespace gets an address and a default route on a veth
	# whose both ends stay inside it: the node takes its INTERNAL-IP from
	# the default route's interface, and nothing leaves the namespace.
	ns=svcnet-conformance-$$
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip -n "$ns" link add v0 type veth peer name v1
	ip -n "$ns" addr add 10.77.0.2/24 dev v0
	ip -n "$ns" link set v0 up
	ip -n "$ns" link set v1 up
	ip -n "$ns" route add default via 10.77.0.1
	data=$(mktemp -d /var/tmp/svcnet-conformance-data.XXXXXX)
	ip netns exec "$ns" "$dir/svcnet" up --nodes "$nodes" --data-dir "$data" \
		--bind-address 127.0.0.1:6443 --metrics-bind-address 0 \
		>"$report/svcnet.log" 2>&1 &
	pid=$!
	local i
	for ((i = 0; i < 120; i++)); do
		grep -q "svcnet is up" "$report/svcnet.log" && break
		kill -0 "$pid" 2>/dev/null || {
			tail -20 "$report/svcnet.log" >&2
			exit 1
		}
		sleep 1
	done
	grep -q "svcnet is up" "$report/svcnet.log" || {
		echo "svcnet did not come up in 120 s; see $report/svcnet.log" >&2
		exit 1
	}

	local rc=0
	ip netns exec "$ns" "$dir/ginkgo-$v" --procs="$procs" --timeout=4h --no-color -v \
		--junit-report=junit.xml --output-dir="$report" \
		--focus="$focus" ${skip:+--skip="$skip"} "$dir/e2e-$v.test" -- \
		--kubeconfig "$data/kubeconfig" --provider=local \
		--kubectl-path="$(command -v kubectl)" --report-dir="$report" \
		>"$report/ginkgo.log" 2>&1 || rc=$?
	summary "$report"
	echo "report: $report (ginkgo.log, junit.xml, svcnet.log)"
	return $rc
}

# summary prints the pass/fail/skip counts of a run and the failed tests.
summary() {
	local junit=$1/junit.xml
	[[ -f $junit ]] || return 0
	python3 - "$junit" <<-'EOF'
		import sys, xml.etree.ElementTree as ET
		passed, failed, skipped = 0, [], 0
		for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
		    name = tc.get("name", "")
		    if name.startswith("[SynchronizedBeforeSuite]") or name.startswith("[SynchronizedAfterSuite]") or name.startswith("[ReportAfterSuite]"):
		        continue
		    sk = tc.find("skipped")
		    if sk is not None:
		        # Specs the focus filtered out say just "skipped"; those
		        # that skipped themselves say why.
		        if sk.get("message", "skipped") != "skipped":
		            skipped += 1
		    elif tc.find("failure") is not None or tc.find("error") is not None:
		        failed.append(name)
		    else:
		        passed += 1
		print(f"passed {passed}, failed {len(failed)}, skipped {skipped}")
		for name in failed:
		    print("FAIL", name)
	EOF
}

case ${1:-} in
build) build ;;
run)
	shift
	run "$@"
	;;
*) usage ;;
esac
