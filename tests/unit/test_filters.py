"""The Jinja filters stay thin: every filter of plugins/filter/ takes at most five arguments (the value it filters
included) and names none by ``*args``/``**kwargs``, and every one has a caller in a role, playbook or test playbook,
so no filter is dead. What a role strings together beyond that is a module's job (tenants, validation_scenario)."""

import glob
import inspect
import os
import re

import pytest

from ansible_collections.fairgpu.tenancy.plugins.filter import fairgpu, lab, monitoring, teardown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOST_ARGUMENTS = 5
FILTERS = sorted((name, function) for module in (fairgpu, lab, monitoring, teardown)
                 for name, function in module.FilterModule().filters().items())
CALLERS = [path for pattern in ("roles/**/*.yml", "roles/**/*.j2", "playbooks/*.yml", "extensions/**/*.yml",
                                "tests/integration/*.yml", "tests/unit/fixtures/**/*.yml")
           for path in glob.glob(os.path.join(ROOT, pattern), recursive=True)]


def _text():
    texts = []
    for path in CALLERS:
        with open(path) as handle:
            texts.append(handle.read())
    return "\n".join(texts)


@pytest.mark.parametrize("name, function", FILTERS, ids=[name for name, _function in FILTERS])
def test_a_filter_takes_at_most_five_named_arguments(name, function):
    parameters = list(inspect.signature(function).parameters.values())
    assert not [p for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)], name
    assert len(parameters) <= MOST_ARGUMENTS, (name, [p.name for p in parameters])


def test_every_filter_has_a_caller():
    text = _text()
    dead = [name for name, _function in FILTERS if not re.search(r"fairgpu\.tenancy\.%s\b" % name, text)]
    assert dead == []


def test_every_name_a_role_or_playbook_calls_exists():
    """A filter removed while a playbook still calls it fails only on the path that reaches it (render.yml on path
    mig once called a filter that was gone): every fairgpu.tenancy.<name> written in a role, playbook or test
    playbook is a filter, module, role, action or callback of the collection."""
    names = set(name for name, _function in FILTERS)
    for kind in ("modules", "action", "callback"):
        names |= set(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "plugins", kind, "*.py")))
    names |= set(os.listdir(os.path.join(ROOT, "roles"))) | {"cluster"}  # cluster: the action group as well
    called = set(re.findall(r"fairgpu\.tenancy\.([a-z_]+)", _text()))
    assert sorted(called - names) == []
