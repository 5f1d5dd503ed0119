#!/usr/bin/env bash
# Build the embedded cluster's binaries from Go modules into a per-version cache, and print where they are.
#
#   toolchain.sh [ensure] [COMPONENT ...]   build what is missing (default: all), print the JSON manifest
#   toolchain.sh manifest                   print the JSON manifest, build nothing (exit 3 if incomplete)
#
# Components: kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl), etcd,
# kwok (kwok, kwokctl), kueue (the controller plus its CRDs and webhook manifests), prometheus (prometheus,
# promtool; the monitoring role's local server and the rule tests), kube-state-metrics (the local monitoring's
# source of the nodes' allocatable GPUs and readiness), helm (the helm modes' client, with Kueue's own chart as the
# Kueue module ships it), prometheus-operator (the operator and its CRDs; the helm-mode monitoring objects' test),
# perses (percli, Perses's command line: the lint of the Perses dashboard file), prometheus-web (prometheus with its
# web UI, which npm builds; the lab's monitoring server where its web UI is asked for).
# `ensure` without components builds the first six: the last four only where asked for.
#
# Versions come from versions.env beside this script unless the environment sets them. The cache is
# ${FAIRGPU_CACHE:-$HOME/.cache/fairgpu}/<component>-<version>/; a component whose directory holds a
# complete build (marker file .complete) is never rebuilt. Progress goes to stderr, the manifest to stdout:
#   {"cache": DIR, "built": [COMPONENT ...], "versions": {...}, "binaries": {NAME: PATH}, "kueue_manifests": DIR}
#
# Prometheus 3.x publishes its Go module as v0.<major*100+minor>.<patch> (3.16.0 is v0.316.0); versions.env pins
# the release version (v3.16.0) and the build maps it.
#
# Why wrapper modules: k8s.io/kubernetes and go.etcd.io/etcd/server/v3 replace their sibling modules with
# relative paths, so `go install mod@version` refuses them. A wrapper module requires the real module and
# replaces each sibling with its published tag (what kubernetes-sigs/scheduler-plugins does).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
while IFS='=' read -r key value; do
  [[ $key =~ ^[A-Z_]+$ ]] || continue
  [[ -n ${!key:-} ]] || printf -v "$key" '%s' "$value"
done <"$here/versions.env"

cache=${FAIRGPU_CACHE:-$HOME/.cache/fairgpu}
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
export CGO_ENABLED=0
started=$SECONDS
built=()

say() { printf '[toolchain +%4ds] %s\n' "$((SECONDS - started))" "$*" >&2; }
die() { say "error: $*"; exit 2; }

# Run a long command, printing a heartbeat line every 30 s so a waiting user sees it is alive.
with_heartbeat() {
  local what=$1; shift
  "$@" &
  local pid=$! tick=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; tick=$((tick + 1))
    ((tick % 30 == 0)) && say "still ${what} (${tick}s)"
  done
  wait "$pid"
}

component_dir() { printf '%s/%s-%s' "$cache" "$1" "$2"; }

# The directory of MODULE@VERSION in the Go module cache (downloaded through the proxy when missing).
module_dir() {
  local dir
  dir=$(go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  [[ -d $dir ]] || die "could not download $1 from the Go module proxy"
  printf '%s' "$dir"
}

kube_ldflags() {
  local v=$1 major minor
  IFS=. read -r major minor _ <<<"${v#v}"
  local p=k8s.io/component-base/version
  printf -- '-s -w -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z' \
    "$p" "$v" "$p" "$major" "$p" "$minor" "$p" "$p"
}

# Wrapper module: require MODULE@VERSION and replace every relative-path replace of its go.mod with
# the sibling module at SIBLING_VERSION.
write_wrapper() {
  local dir=$1 module=$2 version=$3 sibling_version=$4 gomod
  mkdir -p "$dir"
  gomod=$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  [[ -f $gomod ]] || die "could not download $module@$version from the Go module proxy"
  {
    printf 'module fairgpu.local/build/%s\n\ngo 1.26\n\nrequire %s %s\n\nreplace (\n' "$(basename "$dir")" "$module" "$version"
    # Sibling modules only: etcd also "replaces" modules it forbids with ./FORBIDDEN_DEPENDENCY.
    awk '$1 != "replace" && /=> *\.\.?\// {print "\t" $1 " => " $1 " '"$sibling_version"'"}' "$gomod"
    printf ')\n'
  } >"$dir/go.mod"
}

# Build PACKAGE of MODULE@VERSION into OUT/bin/BINARY through a wrapper module in OUT/src (siblings at VERSION),
# with LDFLAGS.
build_from_wrapper() {
  local out=$1 module=$2 version=$3 package=$4 binary=$5 ldflags=$6
  write_wrapper "$out/src" "$module" "$version" "$version"
  mkdir -p "$out/bin"
  say "building $binary $version"
  (cd "$out/src" && with_heartbeat "building $binary $version" \
    go build -mod=mod -trimpath -ldflags "$ldflags" -o "$out/bin/$binary" "$package")
}

build_kubernetes() {
  local v=$KUBERNETES_VERSION out src
  out=$(component_dir kubernetes "$v"); src="$out/src"
  write_wrapper "$src" k8s.io/kubernetes "$v" "v0.${v#v1.}"
  mkdir -p "$out/bin"
  say "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $v (cold: tens of minutes on 2 cores)"
  (cd "$src" && with_heartbeat "building kubernetes $v" \
    go build -mod=mod -trimpath -tags selinux,notest -ldflags "$(kube_ldflags "$v")" -o "$out/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
}

build_etcd() {
  local v=$ETCD_VERSION out src
  out=$(component_dir etcd "$v"); src="$out/src"
  write_wrapper "$src" go.etcd.io/etcd/server/v3 "$v" "$v"
  mkdir -p "$out/bin"
  say "building etcd $v"
  (cd "$src" && with_heartbeat "building etcd $v" \
    go build -mod=mod -trimpath -ldflags '-s -w' -o "$out/bin/etcd" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  local v=$KWOK_VERSION out moddir
  out=$(component_dir kwok "$v")
  mkdir -p "$out/bin"
  say "building kwok, kwokctl $v"
  with_heartbeat "building kwok $v" env GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${v#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBERNETES_VERSION#v}" \
    "sigs.k8s.io/kwok/cmd/kwok@$v" "sigs.k8s.io/kwok/cmd/kwokctl@$v"
  # kwok's own stages (node initialise and lease heartbeat, the general pod life cycle whose completion
  # honours the pod-complete.stage.kwok.x-k8s.io/delay annotation), read from the module at this version.
  moddir=$(module_dir "sigs.k8s.io/kwok@$v")
  rm -rf "$out/stages" && mkdir -p "$out/stages"
  awk 'FNR == 1 && NR > 1 {print "---"} {print}' "$moddir"/kustomize/stage/node/fast/node-initialize.yaml \
    "$moddir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$moddir"/kustomize/stage/pod/general/pod-*.yaml >"$out/stages/stages.yaml"
}

build_kueue() {
  local v=$KUEUE_VERSION out moddir
  out=$(component_dir kueue "$v")
  mkdir -p "$out/bin" "$out/manifests"
  say "building kueue $v"
  with_heartbeat "building kueue $v" env GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$v" "sigs.k8s.io/kueue/cmd/kueue@$v"
  moddir=$(module_dir "sigs.k8s.io/kueue@$v")
  # Upstream's own CRDs and webhook configurations, read from the module, never kept in this repository.
  rm -rf "$out/manifests/crd" && cp -r "$moddir/config/components/crd/bases" "$out/manifests/crd"
  cp "$moddir/config/components/webhook/manifests.yaml" "$out/manifests/webhook.yaml"
  chmod -R u+w "$out/manifests"
}

# Helm from helm.sh/helm/v3 (no replaces: plain go install; ldflags as its Makefile sets them). Beside it, Kueue's
# own chart at the pinned Kueue version, copied from the Kueue module (charts/kueue of sigs.k8s.io/kueue): the
# helm-mode kueue role installs it by path where no chart repository is reachable (kueue_chart_ref).
build_helm() {
  local v=$HELM_VERSION out moddir p=helm.sh/helm/v3/internal/version
  out=$(component_dir helm "$v")
  mkdir -p "$out/bin" "$out/charts"
  say "building helm $v"
  with_heartbeat "building helm $v" env GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X $p.version=$v -X $p.gitTreeState=clean" "helm.sh/helm/v3/cmd/helm@$v"
  moddir=$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")
  [[ -d $moddir/charts/kueue ]] || die "sigs.k8s.io/kueue@$KUEUE_VERSION has no charts/kueue"
  rm -rf "$out/charts/kueue-$KUEUE_VERSION" && cp -r "$moddir/charts/kueue" "$out/charts/kueue-$KUEUE_VERSION"
  chmod -R u+w "$out/charts"
}

# The Prometheus Operator from github.com/prometheus-operator/prometheus-operator (cmd/operator). Its go.mod
# replaces pkg/apis/monitoring and pkg/client with relative paths, so it builds through a wrapper module like
# Kubernetes and etcd. Its CRDs (example/prometheus-operator-crd) are copied from the module beside the binary.
build_prometheus_operator() {
  local v=$PROMETHEUS_OPERATOR_VERSION out moddir m=github.com/prometheus-operator/prometheus-operator
  out=$(component_dir prometheus-operator "$v")
  build_from_wrapper "$out" "$m" "$v" "$m/cmd/operator" prometheus-operator \
    "-s -w -X github.com/prometheus/common/version.Version=${v#v}"
  moddir=$(module_dir "$m@$v")
  rm -rf "$out/crd" && cp -r "$moddir/example/prometheus-operator-crd" "$out/crd" && chmod -R u+w "$out/crd"
}

# Prometheus and promtool from the Go module github.com/prometheus/prometheus (no replaces: plain go install).
# Tag remove_all_sd leaves out the cloud service discoveries (static and file discovery stay), which the local
# server does not use and which would double the build. Without tag builtinassets there is no web UI (the HTTP API
# is complete): prometheus-web below is the build with it.
prometheus_module_version() {
  local major minor patch
  IFS=. read -r major minor patch <<<"${1#v}"
  printf 'v0.%d%02d.%d' "$major" "$minor" "$patch"
}

# The version a release sets (github.com/prometheus/common/version, as .promu.yml's ldflags do).
prometheus_ldflags() {
  local p=github.com/prometheus/common/version
  printf -- '-s -w -X %s.Version=%s -X %s.Revision=%s -X %s.Branch=release -X %s.BuildUser=fairgpu -X %s.BuildDate=19700101-00:00:00' \
    "$p" "${1#v}" "$p" "$(prometheus_module_version "$1")" "$p" "$p" "$p"
}

build_prometheus() {
  local v=$PROMETHEUS_VERSION out mv
  out=$(component_dir prometheus "$v"); mv=$(prometheus_module_version "$v")
  mkdir -p "$out/bin"
  say "building prometheus, promtool $v (module $mv)"
  with_heartbeat "building prometheus $v" env GOBIN="$out/bin" go install -trimpath -tags remove_all_sd,netgo \
    -ldflags "$(prometheus_ldflags "$v")" \
    "github.com/prometheus/prometheus/cmd/prometheus@$mv" "github.com/prometheus/prometheus/cmd/promtool@$mv"
}

# Prometheus with its web UI, built as upstream's release binaries are (Makefile: assets-compress, then the Go build
# with tag builtinassets): in a copy of the module's sources, web/ui installed with pnpm (PNPM_VERSION, from the npm
# registry, upstream's pnpm-lock.yaml with PROMETHEUS_WEB_NPM_OVERRIDES, install scripts off by web/ui/.npmrc) and
# the UI built (build_ui.sh --mantine-ui: the UI and the two PromQL modules it uses), the assets gzipped and listed in
# web/ui/embed.go by scripts/compress_assets.sh, then the Go build (GOWORK=off: the module's go.work names nested
# modules its published zip leaves out). The sources, pnpm and its store (about 450 MB) are removed afterwards.
# About a minute when the Go build cache holds the prometheus component's packages.
build_prometheus_web() {
  local v=$PROMETHEUS_VERSION out mv moddir override frozen=--frozen-lockfile
  out=$(component_dir prometheus-web "$v"); mv=$(prometheus_module_version "$v")
  command -v npm >/dev/null || die "npm is not on PATH: Prometheus's web UI is built with pnpm from the npm registry; install Node.js 20 or later with npm"
  moddir=$(module_dir "github.com/prometheus/prometheus@$mv")
  rm -rf "$out" && mkdir -p "$out/bin"
  cp -r "$moddir" "$out/src" && chmod -R u+w "$out/src"
  say "installing pnpm $PNPM_VERSION from the npm registry"
  npm install --silent --no-audit --no-fund --prefix "$out/pnpm" "pnpm@$PNPM_VERSION" >&2
  if [[ -n ${PROMETHEUS_WEB_NPM_OVERRIDES:-} ]]; then
    {
      echo 'overrides:'
      for override in $PROMETHEUS_WEB_NPM_OVERRIDES; do printf "  '%s': '%s'\n" "${override%@*}" "${override##*@}"; done
    } >>"$out/src/web/ui/pnpm-workspace.yaml"
    frozen=--no-frozen-lockfile
  fi
  say "building Prometheus's web UI $v (module $mv)"
  (cd "$out/src/web/ui" && export PATH="$out/pnpm/node_modules/.bin:$PATH" CI="" &&
    with_heartbeat "installing the web UI's packages" pnpm install --silent "$frozen" --store-dir "$out/pnpm-store" >&2 &&
    with_heartbeat "building the web UI" pnpm run build:mantine-ui >&2)
  (cd "$out/src" && bash scripts/compress_assets.sh >&2)
  say "building prometheus $v with its web UI"
  (cd "$out/src" && with_heartbeat "building prometheus $v with its web UI" env GOWORK=off go build -trimpath \
    -tags remove_all_sd,netgo,builtinassets -ldflags "$(prometheus_ldflags "$v")" -o "$out/bin/prometheus" ./cmd/prometheus)
  rm -rf "$out/src" "$out/pnpm" "$out/pnpm-store"
}

# percli from the Go module github.com/perses/perses, through a wrapper module: the proxy answers no version list
# for it (403), which `go install module@version` asks for (the module's deprecation), while a build in a module
# that requires the exact version does not. The version its release sets (github.com/prometheus/common/version, as
# Perses's Makefile's LDFLAGS do).
build_perses() {
  local v=$PERSES_VERSION m=github.com/perses/perses p=github.com/prometheus/common/version
  build_from_wrapper "$(component_dir perses "$v")" "$m" "$v" "$m/cmd/percli" percli \
    "-s -w -X $p.Version=${v#v} -X $p.Branch=release -X $p.BuildUser=fairgpu"
}

# kube-state-metrics from the Go module k8s.io/kube-state-metrics/v2 (no replaces: plain go install), with the
# version its release sets (github.com/prometheus/common/version, as its Makefile's ldflags do).
build_kube_state_metrics() {
  local v=$KUBE_STATE_METRICS_VERSION out p=github.com/prometheus/common/version
  out=$(component_dir kube-state-metrics "$v")
  mkdir -p "$out/bin"
  say "building kube-state-metrics $v"
  with_heartbeat "building kube-state-metrics $v" env GOBIN="$out/bin" go install -trimpath \
    -ldflags "-s -w -X $p.Version=$v -X $p.Branch=release -X $p.BuildUser=fairgpu" \
    "k8s.io/kube-state-metrics/v2@$v"
}

ensure() {
  local name=$1 version dir
  version=$(version_of "$name")
  dir=$(component_dir "$name" "$version")
  if [[ -f $dir/.complete ]]; then
    say "$name $version: cached in $dir"
    return
  fi
  command -v go >/dev/null || die "go is not on PATH: install Go >= 1.26 (https://go.dev/doc/install)"
  local t0=$SECONDS
  "build_${name//-/_}"
  date -u +%FT%TZ >"$dir/.complete"
  built+=("$name")
  say "$name $version: built in $((SECONDS - t0))s"
}

version_of() {
  case $1 in
    kubernetes) echo "$KUBERNETES_VERSION" ;; etcd) echo "$ETCD_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;; kueue) echo "$KUEUE_VERSION" ;; prometheus) echo "$PROMETHEUS_VERSION" ;;
    kube-state-metrics) echo "$KUBE_STATE_METRICS_VERSION" ;;
    helm) echo "$HELM_VERSION" ;; prometheus-operator) echo "$PROMETHEUS_OPERATOR_VERSION" ;;
    perses) echo "$PERSES_VERSION" ;; prometheus-web) echo "$PROMETHEUS_VERSION" ;;
    *) die "unknown component '$1' (known: kubernetes etcd kwok kueue prometheus kube-state-metrics helm prometheus-operator perses prometheus-web)" ;;
  esac
}

manifest() {
  local k e w q p s h o r pw
  k=$(component_dir kubernetes "$KUBERNETES_VERSION")/bin
  e=$(component_dir etcd "$ETCD_VERSION")/bin
  w=$(component_dir kwok "$KWOK_VERSION")/bin
  q=$(component_dir kueue "$KUEUE_VERSION")
  p=$(component_dir prometheus "$PROMETHEUS_VERSION")/bin
  s=$(component_dir kube-state-metrics "$KUBE_STATE_METRICS_VERSION")/bin
  h=$(component_dir helm "$HELM_VERSION")
  o=$(component_dir prometheus-operator "$PROMETHEUS_OPERATOR_VERSION")
  r=$(component_dir perses "$PERSES_VERSION")/bin
  pw=$(component_dir prometheus-web "$PROMETHEUS_VERSION")/bin
  local names=""
  ((${#built[@]})) && names=$(printf '"%s",' "${built[@]}") && names=${names%,}
  cat <<EOF
{"cache": "$cache", "built": [$names],
 "versions": {"kubernetes": "$KUBERNETES_VERSION", "etcd": "$ETCD_VERSION", "kwok": "$KWOK_VERSION", "kueue": "$KUEUE_VERSION",
  "prometheus": "$PROMETHEUS_VERSION", "kube-state-metrics": "$KUBE_STATE_METRICS_VERSION", "helm": "$HELM_VERSION", "prometheus-operator": "$PROMETHEUS_OPERATOR_VERSION",
  "perses": "$PERSES_VERSION"},
 "binaries": {"kube-apiserver": "$k/kube-apiserver", "kube-controller-manager": "$k/kube-controller-manager",
  "kube-scheduler": "$k/kube-scheduler", "kubectl": "$k/kubectl", "etcd": "$e/etcd",
  "kwok": "$w/kwok", "kwokctl": "$w/kwokctl", "kueue": "$q/bin/kueue",
  "prometheus": "$p/prometheus", "promtool": "$p/promtool", "kube-state-metrics": "$s/kube-state-metrics",
  "helm": "$h/bin/helm",
  "prometheus-operator": "$o/bin/prometheus-operator", "percli": "$r/percli",
  "prometheus-web": "$pw/prometheus"},
 "kwok_stages": "$(dirname "$w")/stages/stages.yaml", "kueue_manifests": "$q/manifests",
 "kueue_chart": "$h/charts/kueue-$KUEUE_VERSION", "prometheus_operator_crds": "$o/crd"}
EOF
}

action=ensure
case ${1:-} in ensure | manifest) action=$1; shift ;; esac
components=("$@")
((${#components[@]})) || components=(etcd kwok kubernetes kueue prometheus kube-state-metrics)
for c in "${components[@]}"; do version_of "$c" >/dev/null; done

mkdir -p "$cache"
if [[ $action == manifest ]]; then
  manifest
  for c in "${components[@]}"; do [[ -f $(component_dir "$c" "$(version_of "$c")")/.complete ]] || exit 3; done
  exit 0
fi

# What is cached is never rebuilt (its .complete marker is written last): a caller whose components are all
# there needs no lock, and does not wait for another checkout's build of something else (a site.yml on a
# warm cache sat out another worktree's helm build, 15 min, in its Kueue step).
all_complete=1
for c in "${components[@]}"; do [[ -f $(component_dir "$c" "$(version_of "$c")")/.complete ]] || all_complete=0; done
if ((all_complete)); then
  manifest
  exit 0
fi

# One build at a time per cache: a second caller waits, then finds everything cached.
exec 9>"$cache/.lock"
flock 9
for c in "${components[@]}"; do ensure "$c"; done
manifest
