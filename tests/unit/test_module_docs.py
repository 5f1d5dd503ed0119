"""Every module's DOCUMENTATION, EXAMPLES and RETURN parse as ansible-doc needs them, and ansible-doc renders
them whole: every option and return value with its description, samples of the documented shape."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

MODULES = os.path.join(os.path.dirname(__file__), "..", "..", "plugins", "modules")
NAMES = sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith(".py") and f != "__init__.py")


def blocks(name):
    with open(os.path.join(MODULES, name + ".py")) as handle:
        source = handle.read()
    return {key: yaml.safe_load(re.search(key + r' = r"""(.*?)"""', source, re.S).group(1))
            for key in ("DOCUMENTATION", "EXAMPLES", "RETURN")}


def as_list(value):
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("name", NAMES)
def test_documentation_is_plain_text_everywhere(name):
    docs = blocks(name)
    doc = docs["DOCUMENTATION"]
    assert doc["module"] == name and doc["short_description"]
    # A ": " inside a description item turns it into a mapping, which ansible-doc refuses.
    assert all(isinstance(d, str) and d for d in as_list(doc["description"])), name
    for option, spec in (doc.get("options") or {}).items():
        assert all(isinstance(d, str) and d for d in as_list(spec["description"])), (name, option)
    for key, spec in docs["RETURN"].items():
        assert all(isinstance(d, str) and d for d in as_list(spec["description"])), (name, key)
        assert {"returned", "type"} <= set(spec), (name, key)
    assert isinstance(docs["EXAMPLES"], list) and docs["EXAMPLES"]


# What ansible-doc itself renders: every module's documentation (with kubernetes.core's fragments merged) as
# JSON and as text, read once for all modules.
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
FQCN = ["fairgpu.tenancy." + name for name in NAMES]
OPTION_KEYS = {"description", "type", "default", "required", "choices", "elements", "aliases", "suboptions",
               "version_added", "version_added_collection", "no_log", "apply_defaults"}
RETURN_KEYS = {"description", "returned", "type", "elements", "contains", "sample", "example", "choices",
               "version_added", "version_added_collection"}
TYPES = {"str", "int", "float", "bool", "list", "dict", "path", "raw"}
RETURN_TYPES = TYPES - {"path"}
PYTHON_TYPES = {"str": str, "path": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}


def _ansible_doc(*args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", "module"] + list(args) + FQCN,
                         cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "WARNING" not in run.stderr and "ERROR" not in run.stderr, run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def rendered():
    """``{module: (ansible-doc --json entry, ansible-doc text)}``."""
    docs = json.loads(_ansible_doc("--json"))
    texts = dict(zip(FQCN, re.split(r"^> MODULE \S+ \(.*\)$", _ansible_doc(), flags=re.M)[1:]))
    assert sorted(docs) == sorted(texts) == FQCN
    return {name: (docs[name], texts[name]) for name in FQCN}


def _description_errors(where, spec):
    description = spec.get("description")
    if not all(isinstance(d, str) and d.strip() for d in as_list(description)) or not description:
        return ["%s: description is %r, not text" % (where, description)]
    return []


def _option_errors(where, options):
    errors = []
    for name, spec in options.items():
        path = "%s.%s" % (where, name)
        errors += ["%s: unknown key %r (a description split by ': ' or ', ' in a flow mapping?)" % (path, key)
                   for key in set(spec) - OPTION_KEYS]
        errors += _description_errors(path, spec)
        if spec.get("type", "str") not in TYPES:
            errors.append("%s: type %r" % (path, spec.get("type")))
        errors += _option_errors(path, spec.get("suboptions") or {})
    return errors


def _sample_errors(path, spec, sample):
    """Whether ``sample`` has the shape ``spec`` documents: its type, its elements' type and, for a dict with
    ``contains``, its keys (directly, or under each key of a mapping keyed by name)."""
    kind = PYTHON_TYPES.get(spec.get("type"))
    if sample is None or kind is None:
        return []
    if not isinstance(sample, kind) or (spec["type"] in ("int", "float") and isinstance(sample, bool)):
        return ["%s: sample %r is no %s" % (path, sample, spec["type"])]
    if "choices" in spec and sample not in spec["choices"]:
        return ["%s: sample %r is not among its choices %s" % (path, sample, spec["choices"])]
    contains = spec.get("contains") or {}
    if spec["type"] == "list":
        errors = []
        for item in sample:
            errors += _sample_errors(path + "[]", dict(spec, type=spec.get("elements")), item)
        return errors
    if spec["type"] == "dict" and contains:
        entries = [sample] if set(sample) <= set(contains) else list(sample.values())
        errors = []
        for entry in entries:
            if not isinstance(entry, dict) or not set(entry) <= set(contains):
                return ["%s: sample keys %s are not among its contains %s"
                        % (path, sorted(entry) if isinstance(entry, dict) else entry, sorted(contains))]
            for key, value in entry.items():
                errors += _sample_errors("%s.%s" % (path, key), contains[key], value)
        return errors
    return []


def _return_errors(where, returns, top=True):
    errors = []
    for name, spec in returns.items():
        path = "%s.%s" % (where, name)
        errors += ["%s: unknown key %r (a description split by ': ' or ', ' in a flow mapping?)" % (path, key)
                   for key in set(spec) - RETURN_KEYS]
        errors += _description_errors(path, spec)
        if spec.get("type") not in RETURN_TYPES:
            errors.append("%s: type %r" % (path, spec.get("type")))
        if top and not isinstance(spec.get("returned"), str):
            errors.append("%s: returned %r" % (path, spec.get("returned")))
        if spec.get("type") == "list" and spec.get("elements") not in TYPES:
            errors.append("%s: a list without elements" % path)
        errors += _sample_errors(path, spec, spec.get("sample"))
        errors += _return_errors(path, spec.get("contains") or {}, top=False)
    return errors


def _paths(tree, key):
    """Dotted names of a nested options (``suboptions``) or return (``contains``) tree."""
    for name, spec in tree.items():
        yield name
        for sub in _paths(spec.get(key) or {}, key):
            yield name + "." + sub


def _texts(value):
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("fqcn", FQCN)
def test_ansible_doc_renders_every_option_and_return_value(rendered, fqcn):
    entry, text = rendered[fqcn]
    doc, returns = entry["doc"], entry["return"] or {}
    assert doc["module"] == fqcn.split(".")[-1] and doc["short_description"] and doc["author"]
    errors = _description_errors("description", doc) + _option_errors("options", doc.get("options") or {})
    errors += _return_errors("RETURN", returns)
    # Semantic markup names what exists: O(option), O(option=value), RV(return.value).
    options, values = set(_paths(doc.get("options") or {}, "suboptions")), set(_paths(returns, "contains"))
    for line in _texts(doc) + _texts(returns):
        errors += ["O(%s) names no option" % o for o in re.findall(r"\bO\(([^)=]+)", line)
                   if o.replace("[]", "") not in options]
        errors += ["RV(%s) names no return value" % r for r in re.findall(r"\bRV\(([^)=]+)", line)
                   if r.replace("[]", "") not in values]
    assert errors == [], "\n".join(errors)
    # The text render shows every option and return value, and no "rest of a description.: null" line, what a
    # description cut at ", " in a flow mapping leaves.
    shown = set(re.findall(r"^[ \t]*[-=]?[ \t]*([A-Za-z_][\w-]*)", text, re.M))
    names = {path.split(".")[-1] for path in options | values}
    assert names <= shown, sorted(names - shown)
    assert re.findall(r"^[ \t]+\S[^:\n]*\.: null$", text, re.M) == []


@pytest.mark.parametrize("fqcn", FQCN)
def test_examples_call_the_module_with_its_options(rendered, fqcn):
    entry, _text = rendered[fqcn]
    tasks = yaml.safe_load(entry["examples"])
    calls = [task[fqcn] or {} for task in tasks if fqcn in task]
    assert calls, "no example calls %s" % fqcn
    options = set(entry["doc"]["options"])
    for args in calls:
        assert isinstance(args, dict) and set(args) <= options, sorted(set(args) - options)
