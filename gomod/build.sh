#!/usr/bin/env bash
# Builds the real Kubernetes binaries the tests and `kamaji-broker sandbox --kubernetes real` run:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes, and
# etcd from go.etcd.io/etcd/server/v3, at the versions the wrapper modules beside this script
# pin (gomod/kubernetes/go.mod, gomod/etcd/go.mod). Nothing of those projects' source is kept
# here: the Go module proxy serves it, checked against the committed go.sum files.
#
#   gomod/build.sh          build what is missing into the cache, print the directory
#   gomod/build.sh --dir    print the directory only (nothing is built)
#
# The directory is ${XDG_CACHE_HOME:-~/.cache}/kamaji-broker/kube/<kubernetes version>-etcd<etcd
# version>/. A binary found in $KUBEBUILDER_ASSETS (envtest's convention: a user who already has
# some of them points there; sandbox.realkube looks there first too) or already in the cache is
# not built. Two builds at once (two `make test` side by side) take turns
# on a lock; each binary is written beside its place and renamed into it, so a reader never
# sees half of one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Go 1.26 builds these versions; a newer module would need `GOTOOLCHAIN=go1.27.3` here.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

version_of() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { print $NF; exit }' "$here/$1/go.mod"; }
kube_version="$(version_of kubernetes k8s.io/kubernetes)"
etcd_version="$(version_of etcd go.etcd.io/etcd/server/v3)"
kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

dir="${XDG_CACHE_HOME:-$HOME/.cache}/kamaji-broker/kube/${kube_version}-etcd-${etcd_version}"
if [[ "${1:-}" == "--dir" ]]; then
  echo "$dir"
  exit 0
fi

missing() {
  local b
  for b in "$@"; do
    [[ -x "$dir/$b" || (-n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$b") ]] || echo "$b"
  done
}

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

todo_kube=($(missing "${kube_binaries[@]}"))
todo_etcd=($(missing etcd))
if ((${#todo_kube[@]} + ${#todo_etcd[@]} == 0)); then
  echo "$dir"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "gomod/build.sh: go is not installed: the real Kubernetes binaries (${todo_kube[*]} ${todo_etcd[*]}) are built from Go modules (or set KUBEBUILDER_ASSETS to a directory that has them)" >&2
  exit 1
fi

start=$(date +%s)
staging="$(mktemp -d "$dir/.build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT
if ((${#todo_kube[@]})); then
  minor="${kube_version#v1.}"
  minor="${minor%%.*}"
  # What `kubectl version` and /version report, as the release build stamps it.
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${kube_version}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${kube_version}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
  packages=()
  for b in "${todo_kube[@]}"; do packages+=("k8s.io/kubernetes/cmd/$b"); done
  echo "gomod/build.sh: building ${todo_kube[*]} ${kube_version} into $dir" >&2
  (cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$staging/" "${packages[@]}")
fi
if ((${#todo_etcd[@]})); then
  echo "gomod/build.sh: building etcd ${etcd_version} into $dir" >&2
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3)
fi
for b in "${todo_kube[@]}" "${todo_etcd[@]}"; do mv -f "$staging/$b" "$dir/$b"; done
echo "gomod/build.sh: built ${todo_kube[*]} ${todo_etcd[*]} in $(($(date +%s) - start)) s" >&2
echo "$dir"
