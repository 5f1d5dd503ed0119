"""Every module's DOCUMENTATION, EXAMPLES and RETURN parse as ansible-doc needs them."""

import os
import re

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
