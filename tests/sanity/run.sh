#!/usr/bin/env bash
# ansible-test sanity for fairgpu.tenancy, offline: `make sanity` (part of `make lint`); extra arguments go to
# ansible-test, e.g. `bash tests/sanity/run.sh --test pep8`.
#
# ansible-test needs the collection at .../ansible_collections/fairgpu/tenancy, and the collections it depends
# on in the same ansible_collections tree (import and validate-modules load kubernetes.core's module_utils and
# doc fragments). The checkout is neither: this script copies the files git knows (tracked, and untracked ones
# not ignored, as they are in the work tree) into a fresh tree in a temporary directory and links the
# dependencies from the virtualenv's ansible package. The tree lies outside the checkout so that ansible-test
# does not take the checkout's git for the tree's.
#
# Each sanity test with requirements runs in a virtualenv of its own under ~/.ansible/test/venv (made once,
# from the package index). ansible-test bootstraps pip in those with a get-pip script it downloads from a host
# that is not reachable here; tests/sanity/get_pip.py stands in for it in ansible-test's cache.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${VENV:-.venv}
[[ $venv = /* ]] || venv=$root/$venv
python=$venv/bin/python

# The get-pip stand-in, under the name ansible-test looks for (pip's version is ansible-test's choice).
pip_version=$("$python" -c 'import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=None))["pip"])')
get_pip=~/.ansible/test/cache/get_pip_${pip_version//./_}.py
if [[ ! -e $get_pip ]] || grep -q "^\"\"\"Offline stand-in for the get-pip script" "$get_pip"; then
    mkdir -p "$(dirname "$get_pip")"
    cp "$root/tests/sanity/get_pip.py" "$get_pip"
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/fairgpu-sanity.XXXXXX")
trap 'rm -rf "$build"' EXIT
tree=$build/ansible_collections/fairgpu/tenancy
mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' path; do [[ -e $path ]] && printf '%s\0' "$path"; done \
    | xargs -0 cp --parents -P -t "$tree")

# galaxy.yml's dependencies, from the ansible_collections of the virtualenv's ansible package.
"$python" - "$root/galaxy.yml" "$build/ansible_collections" <<'EOF'
import os, sys
import yaml
import ansible_collections
galaxy, target = sys.argv[1:]
with open(galaxy) as handle:
    dependencies = yaml.safe_load(handle).get("dependencies") or {}
for name in dependencies:
    namespace, collection = name.split(".")
    found = [os.path.join(p, namespace, collection) for p in ansible_collections.__path__
             if os.path.isfile(os.path.join(p, namespace, collection, "MANIFEST.json"))]
    if not found:
        sys.exit("sanity: collection %s (a dependency in galaxy.yml) is not installed in the virtualenv" % name)
    os.makedirs(os.path.join(target, namespace), exist_ok=True)
    os.symlink(found[0], os.path.join(target, namespace, collection))
EOF

python_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cd "$tree"
PATH=$venv/bin:$PATH "$venv/bin/ansible-test" sanity --python "$python_version" "$@"
