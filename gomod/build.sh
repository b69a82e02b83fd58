#!/usr/bin/env bash
# Builds the real binaries the tests and `kamaji-broker sandbox --kubernetes real` run, at the
# versions the wrapper modules beside this script pin. Nothing of those projects' source is kept
# here: the Go module proxy serves it, checked against the committed go.sum files.
#
#   kube    kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
#           k8s.io/kubernetes (gomod/kubernetes), etcd from go.etcd.io/etcd/server/v3 (gomod/etcd)
#   kamaji  the Kamaji operator from github.com/clastix/kamaji (gomod/kamaji), kwok from
#           sigs.k8s.io/kwok (gomod/kwok), Kamaji's CRDs and webhook rules from the same
#           module version (crds/, webhooks/) and kwok's stages (kwok-stages.yaml)
#   capi    Cluster API's core manager (capi-manager) and clusterctl from sigs.k8s.io/cluster-api
#           (gomod/capi); from the same module version its CRDs (crds/), webhook rules
#           (webhooks/) and a clusterctl repository of its core and kubeadm bootstrap providers
#           (repository/), rendered with the kustomize built into the kube set's kubectl
#   net     linkshaper (gomod/linkshaper, a program of ours on github.com/florianl/go-nfqueue):
#           delay, jitter, loss and cuts on a site's link where the kernel has no tc netem
#
#   gomod/build.sh [SET]          build what SET (default kube) misses into its cache directory
#                                 and print the directory; SET "all" builds every set, prints nothing
#   gomod/build.sh --dir [SET]    print the directory only (nothing is built)
#
# The directories are ${XDG_CACHE_HOME:-~/.cache}/kamaji-broker/kube/<kubernetes version>-etcd-<etcd
# version>/, .../kamaji-broker/kamaji/<kamaji version>-kwok-<kwok version>/ and
# .../kamaji-broker/capi/<cluster-api version>/ and .../kamaji-broker/net/<hash of gomod/linkshaper>/
# (its source is ours, so a change to it is a new directory). A kube binary
# found in $KUBEBUILDER_ASSETS (envtest's convention: a user who already has some of them points
# there; sandbox.realkube looks there first too) or already in the cache is not built. Two
# builds at once (two `make test` side by side) take turns on a lock; each binary is written
# beside its place and renamed into it, so a reader never sees half of one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Go 1.26 builds these versions; a newer module would need `GOTOOLCHAIN=go1.27.3` here.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

version_of() { awk -v m="$2" '$1 == m || ($1 == "require" && $2 == m) { print $NF; exit }' "$here/$1/go.mod"; }
kube_version="$(version_of kubernetes k8s.io/kubernetes)"
etcd_version="$(version_of etcd go.etcd.io/etcd/server/v3)"
kamaji_version="$(version_of kamaji github.com/clastix/kamaji)"
kwok_version="$(version_of kwok sigs.k8s.io/kwok)"
capi_version="$(version_of capi sigs.k8s.io/cluster-api)"
net_version="$(cat "$here"/linkshaper/go.mod "$here"/linkshaper/go.sum "$here"/linkshaper/*.go | sha256sum | cut -c1-12)"
kube_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kamaji-broker"

only_dir=0
if [[ "${1:-}" == "--dir" ]]; then
  only_dir=1
  shift
fi
set_name="${1:-kube}"
case "$set_name" in
  kube) dir="$cache/kube/${kube_version}-etcd-${etcd_version}" ;;
  kamaji) dir="$cache/kamaji/${kamaji_version}-kwok-${kwok_version}" ;;
  capi) dir="$cache/capi/${capi_version}" ;;
  net) dir="$cache/net/${net_version}" ;;
  all)
    if ((only_dir)); then
      echo "gomod/build.sh: --dir takes kube, kamaji, capi or net, not all" >&2
      exit 2
    fi
    # Side by side: much of a first build is waiting on the module proxy.
    pids=()
    for s in kube kamaji capi net; do
      bash "$here/build.sh" "$s" >/dev/null &
      pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    exit "$rc"
    ;;
  *)
    echo "gomod/build.sh: unknown set '$set_name' (kube, kamaji, capi, net or all)" >&2
    exit 2
    ;;
esac
if ((only_dir)); then
  echo "$dir"
  exit 0
fi

missing() {
  local b
  for b in "$@"; do
    [[ -x "$dir/$b" || (-n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$b") ]] || echo "$b"
  done
}

need_go() {
  if ! command -v go >/dev/null; then
    local hint=""
    [[ "$set_name" == "kube" ]] && hint=" (or set KUBEBUILDER_ASSETS to a directory that has them)"
    echo "gomod/build.sh: go is not installed: $* are built from Go modules$hint" >&2
    exit 1
  fi
}

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
start=$(date +%s)
staging="$(mktemp -d "$dir/.build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT

if [[ "$set_name" == "kamaji" ]]; then
  todo=()
  [[ -x "$dir/kamaji" ]] || todo+=(kamaji)
  [[ -x "$dir/kwok" ]] || todo+=(kwok)
  [[ -d "$dir/crds" && -d "$dir/webhooks" && -f "$dir/kwok-stages.yaml" ]] || todo+=(manifests)
  if ((${#todo[@]} == 0)); then
    echo "$dir"
    exit 0
  fi
  need_go "${todo[*]}"
  for t in "${todo[@]}"; do
    case "$t" in
      kamaji)
        echo "gomod/build.sh: building kamaji ${kamaji_version} into $dir" >&2
        # Its main package is the module root: `go build` of the module path.
        (cd "$here/kamaji" && go build -trimpath -ldflags "-s -w" -o "$staging/kamaji" github.com/clastix/kamaji)
        ;;
      kwok)
        echo "gomod/build.sh: building kwok ${kwok_version} into $dir" >&2
        (cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$staging/kwok" sigs.k8s.io/kwok/cmd/kwok)
        ;;
      manifests)
        # The CRDs and the webhooks' rules as the module's Helm chart ships them (controller-gen's
        # output), read from the module cache at the pinned version.
        module="$(cd "$here/kamaji" && go mod download -json github.com/clastix/kamaji | awk -F'"' '/"Dir"/ { print $4 }')"
        mkdir -p "$staging/crds" "$staging/webhooks"
        cp "$module"/charts/kamaji/crds/*.yaml "$staging/crds/"
        cp "$module"/charts/kamaji/controller-gen/*.yaml "$staging/webhooks/"
        chmod -R u+w "$staging/crds" "$staging/webhooks"
        # kwok's "fast" stages, as its kustomize/stage/fast gathers them: Nodes initialized
        # and Ready (heartbeats by Lease), Pods Ready at once, completed and deleted.
        kwok_module="$(cd "$here/kwok" && go mod download -json sigs.k8s.io/kwok | awk -F'"' '/"Dir"/ { print $4 }')"
        for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
          pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
          printf -- '---\n' >>"$staging/kwok-stages.yaml"
          cat "$kwok_module/kustomize/stage/$stage.yaml" >>"$staging/kwok-stages.yaml"
        done
        ;;
    esac
  done
  for t in "${todo[@]}"; do
    case "$t" in
      manifests)
        rm -rf "$dir/crds" "$dir/webhooks" "$dir/kwok-stages.yaml"
        mv "$staging/crds" "$staging/webhooks" "$staging/kwok-stages.yaml" "$dir/"
        ;;
      *) mv -f "$staging/$t" "$dir/$t" ;;
    esac
  done
  echo "gomod/build.sh: built ${todo[*]} in $(($(date +%s) - start)) s" >&2
  echo "$dir"
  exit 0
fi

if [[ "$set_name" == "net" ]]; then
  if [[ ! -x "$dir/linkshaper" ]]; then
    need_go linkshaper
    echo "gomod/build.sh: building linkshaper into $dir" >&2
    (cd "$here/linkshaper" && go build -trimpath -ldflags "-s -w" -o "$staging/linkshaper" .)
    mv -f "$staging/linkshaper" "$dir/linkshaper"
    echo "gomod/build.sh: built linkshaper in $(($(date +%s) - start)) s" >&2
  fi
  echo "$dir"
  exit 0
fi

if [[ "$set_name" == "capi" ]]; then
  todo=()
  [[ -x "$dir/capi-manager" ]] || todo+=(capi-manager)
  [[ -x "$dir/clusterctl" ]] || todo+=(clusterctl)
  [[ -d "$dir/crds" && -d "$dir/webhooks" && -d "$dir/repository" ]] || todo+=(manifests)
  if ((${#todo[@]} == 0)); then
    echo "$dir"
    exit 0
  fi
  need_go "${todo[*]}"
  module="$(cd "$here/capi" && go mod download -json sigs.k8s.io/cluster-api | awk -F'"' '/"Dir"/ { print $4 }')"
  # What `clusterctl version` and the manager report, as CAPI's release build stamps them.
  minor="${capi_version#v1.}"
  minor="${minor%%.*}"
  ldflags="-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${capi_version}"
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=${minor}"
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
  for t in "${todo[@]}"; do
    case "$t" in
      capi-manager)
        echo "gomod/build.sh: building Cluster API's manager ${capi_version} into $dir" >&2
        (cd "$here/capi" && go build -trimpath -ldflags "$ldflags" -o "$staging/capi-manager" sigs.k8s.io/cluster-api/core)
        ;;
      clusterctl)
        echo "gomod/build.sh: building clusterctl ${capi_version} into $dir" >&2
        (cd "$here/capi" && go build -trimpath -ldflags "$ldflags" -o "$staging/clusterctl" sigs.k8s.io/cluster-api/cmd/clusterctl)
        ;;
      manifests)
        # The CRDs and webhook rules as controller-gen wrote them into the module; the providers'
        # components as CAPI's release builds them (`kustomize build <provider>/config/default`),
        # with the kube set's kubectl (built first when missing).
        kubectl="$(bash "$here/build.sh" kube)/kubectl"
        [[ -x "$kubectl" ]] || kubectl="${KUBEBUILDER_ASSETS:?}/kubectl"
        mkdir -p "$staging/crds" "$staging/webhooks"
        cp "$module"/core/config/crd/bases/*.yaml "$staging/crds/"
        cp "$module"/core/config/webhook/manifests.yaml "$staging/webhooks/"
        repo="$staging/repository"
        mkdir -p "$repo/cluster-api/$capi_version" "$repo/bootstrap-kubeadm/$capi_version"
        "$kubectl" kustomize "$module/core/config/default" >"$repo/cluster-api/$capi_version/core-components.yaml"
        "$kubectl" kustomize "$module/bootstrap/kubeadm/config/default" \
          >"$repo/bootstrap-kubeadm/$capi_version/bootstrap-components.yaml"
        cp "$module/metadata.yaml" "$repo/cluster-api/$capi_version/"
        cp "$module/metadata.yaml" "$repo/bootstrap-kubeadm/$capi_version/"
        chmod -R u+w "$staging/crds" "$staging/webhooks" "$repo"
        ;;
    esac
  done
  for t in "${todo[@]}"; do
    case "$t" in
      manifests)
        rm -rf "$dir/crds" "$dir/webhooks" "$dir/repository"
        mv "$staging/crds" "$staging/webhooks" "$staging/repository" "$dir/"
        ;;
      *) mv -f "$staging/$t" "$dir/$t" ;;
    esac
  done
  echo "gomod/build.sh: built ${todo[*]} in $(($(date +%s) - start)) s" >&2
  echo "$dir"
  exit 0
fi

todo_kube=($(missing "${kube_binaries[@]}"))
todo_etcd=($(missing etcd))
if ((${#todo_kube[@]} + ${#todo_etcd[@]} == 0)); then
  echo "$dir"
  exit 0
fi
need_go "the real Kubernetes binaries (${todo_kube[*]} ${todo_etcd[*]})"

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
