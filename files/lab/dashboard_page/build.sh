#!/usr/bin/env bash
# Build fairgpu's dashboard page (this directory) with npm into the toolchain's cache, once per content of its
# sources, and print the directory of the built page (index.html and static/).
#
#   build.sh [ensure]   build it if missing, print the directory
#   build.sh path       print the directory, build nothing (exit 3 if it is not built yet)
#
# The cache is ${FAIRGPU_CACHE:-$HOME/.cache/fairgpu}/dashboard-page-<hash of the sources>/; a build whose marker
# .complete is there is never made again. npm ci installs exactly package-lock.json's versions from the npm registry
# (no install scripts run: nothing the build needs has one), tsc checks the types, rsbuild bundles the page; the
# packages (about 550 MB) are removed afterwards, the page (about 3.4 MB) stays. About a minute and a half.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${FAIRGPU_CACHE:-$HOME/.cache/fairgpu}
sources=(package.json package-lock.json tsconfig.json rsbuild.config.ts src)
hash=$(cd "$here" && find "${sources[@]}" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
out="$cache/dashboard-page-$hash"

case ${1:-ensure} in
  path) echo "$out/dist"; [[ -f $out/.complete ]] || exit 3; exit 0 ;;
  ensure) ;;
  *) echo "usage: build.sh [ensure|path]" >&2; exit 2 ;;
esac
[[ -f $out/.complete ]] && { echo "$out/dist"; exit 0; }
command -v npm >/dev/null || { echo "build.sh: npm is not on PATH: install Node.js 20 or later with npm" >&2; exit 2; }

mkdir -p "$cache"
exec 9>"$cache/.dashboard-page.lock"
flock 9
[[ -f $out/.complete ]] && { echo "$out/dist"; exit 0; }
rm -rf "$out" && mkdir -p "$out"
(cd "$here" && cp -r "${sources[@]}" "$out/")
started=$SECONDS
(cd "$out" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2 && npm run --silent build >&2)
rm -rf "$out/node_modules"
date -u +%FT%TZ >"$out/.complete"
echo "build.sh: the dashboard page built in $((SECONDS - started))s" >&2
echo "$out/dist"
