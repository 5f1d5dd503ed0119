"""The shared names (plugins/module_utils/common/names.py) are written once: no other Python file of the collection
spells one of them as a string of its own, and role YAML writes them only where names.YAML_LITERALS says."""

import io
import os
import re
import tokenize

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = {key: value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}


def _python_files():
    for top in ("plugins",):
        for directory, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith(".py"):
                    yield os.path.join(directory, name)


def _strings(path):
    with open(path, encoding="utf-8") as handle:
        for token in tokenize.generate_tokens(io.StringIO(handle.read()).readline):
            if token.type == tokenize.STRING:
                yield token.start[0], token.string


def test_no_python_file_spells_a_shared_name_itself():
    spelled = []
    for path in _python_files():
        if path.endswith(os.path.join("common", "names.py")):
            continue
        for line, literal in _strings(path):
            value = literal.strip("\"'")
            for key, name in NAMES.items():
                if value == name and literal[0] in "\"'" and len(literal) == len(name) + 2:
                    spelled.append("%s:%d: %s (use names.%s)" % (os.path.relpath(path, ROOT), line, literal, key))
    assert not spelled, spelled


def _yaml_files():
    for top in ("roles", "playbooks", "inventories", "extensions"):
        for directory, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.relpath(os.path.join(directory, name), ROOT)


def _says(path, name):
    """Whether a non-comment line of ``path`` says ``name`` as a whole (not inside a longer name)."""
    pattern = re.compile(r"(?<![\w./-])%s(?![\w./])" % re.escape(name))
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return any(pattern.search(line) for line in handle if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("key", sorted(names.YAML_LITERALS))
def test_role_yaml_writes_a_name_only_where_listed(key):
    name = NAMES[key]
    listed = set(names.YAML_LITERALS[key])
    saying = {path for path in _yaml_files() if _says(path, name)}
    assert saying == listed, "names.YAML_LITERALS[%r]: add %s, remove %s" % (
        key, sorted(saying - listed), sorted(listed - saying))


def test_names_of_objects_only_python_sends_are_not_in_yaml():
    only_python = set(NAMES) - set(names.YAML_LITERALS) - {"GPU_RESOURCE", "MIG_RESOURCE_PREFIX", "GPU_PRODUCT_LABEL",
                                                           "GPU_COUNT_LABEL", "ADMISSION_API", "RBAC_API",
                                                           "JOB_NAME_LABEL", "WORKLOAD_PREFIX", "MIG_CONFIG_LABEL",
                                                           "MIG_STATE_LABEL", "MULTIKUEUE_CONTROLLER"}
    found = ["%s in %s" % (key, path) for key in sorted(only_python) for path in _yaml_files() if _says(path, NAMES[key])]
    assert not found, found
