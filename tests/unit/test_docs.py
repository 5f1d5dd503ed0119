# -*- coding: utf-8 -*-
"""The README and docs/ stay true: the code map of docs/architecture.md lists every file of the code and nothing
that is gone, the README stays short, and every relative link names a file and a heading that exist."""

from __future__ import absolute_import, division, print_function

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README_MAX_LINES = 300
# Where a path of the code map may point (a backticked word that starts with one of these is a path).
MAP_PREFIXES = ("plugins/", "roles/", "playbooks/", "files/", "tests/", "inventories/", "extensions/",
                "examples/", "docs/", "changelogs/", "meta/")
LINK = re.compile(r"(?<!!)\[(?:[^\]]|\n)*?\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def _without_code(text):
    """The text outside fenced code blocks and inline code spans (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def code_map_section(text):
    """The lines of the section headed "Code map" (up to the next heading of the same or a higher level)."""
    lines = text.split("\n")
    for start, line in enumerate(lines):
        match = re.match(r"(#+) Code map\s*$", line)
        if match:
            level = len(match.group(1))
            body = []
            for line in lines[start + 1:]:
                heading = re.match(r"(#+) ", line)
                if heading and len(heading.group(1)) <= level:
                    break
                body.append(line)
            return "\n".join(body)
    raise AssertionError("docs/architecture.md has no section headed 'Code map'")


def listed_paths(section):
    """Every backticked path of the code map, without a trailing slash."""
    words = re.findall(r"`([^`\s]+)`", section)
    return {word.rstrip("/") for word in words if word.startswith(MAP_PREFIXES)}


def code_files(root=ROOT):
    """What the code map must list: every module, module_utils file (recursive, not __init__.py), filter,
    action plugin, callback, role directory and playbook."""
    wanted = set()
    for pattern in ("plugins/modules/*.py", "plugins/module_utils/**/*.py", "plugins/filter/*.py",
                    "plugins/action/*.py", "plugins/callback/*.py", "playbooks/*.yml"):
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            if os.path.basename(path) != "__init__.py":
                wanted.add(os.path.relpath(path, root))
    for path in glob.glob(os.path.join(root, "roles", "*")):
        if os.path.isdir(path):
            wanted.add(os.path.relpath(path, root))
    return wanted


def map_defects(section, root=ROOT):
    listed = listed_paths(section)
    missing = sorted(code_files(root) - listed)
    gone = sorted(path for path in listed if not os.path.exists(os.path.join(root, path)))
    return missing, gone


def test_the_code_map_lists_every_file_and_nothing_that_is_gone():
    missing, gone = map_defects(code_map_section(_read("docs/architecture.md")))
    assert not missing, "docs/architecture.md's code map does not list: %s" % ", ".join(missing)
    assert not gone, "docs/architecture.md's code map lists what does not exist: %s" % ", ".join(gone)


def test_the_code_map_check_fails_on_a_real_defect(tmp_path):
    """A line deleted from the map, or a file listed that is gone, is found."""
    section = code_map_section(_read("docs/architecture.md"))
    lines = section.split("\n")
    victim = next(line for line in lines if "`plugins/modules/drift_info.py`" in line)
    missing, gone = map_defects("\n".join(line for line in lines if line != victim))
    assert missing == ["plugins/modules/drift_info.py"] and gone == []
    missing, gone = map_defects(section + "\n| `plugins/module_utils/kueue/gone.py` | removed |\n")
    assert missing == [] and gone == ["plugins/module_utils/kueue/gone.py"]


def test_the_readme_is_short():
    lines = _read("README.md").count("\n")
    assert lines <= README_MAX_LINES, "README.md has %d lines, at most %d" % (lines, README_MAX_LINES)


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but hyphens and underscores dropped, spaces to
    hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text, flags=re.U)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor of a Markdown file, duplicates numbered as GitHub numbers them."""
    seen = {}
    found = set()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for match in re.finditer(r"^#{1,6} (.+?)\s*#*\s*$", text, flags=re.M):
        base = anchor(match.group(1))
        count = seen.get(base, 0)
        found.add(base if count == 0 else "%s-%d" % (base, count))
        seen[base] = count + 1
    return found


def markdown_files():
    return ["README.md"] + sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def link_defects(source, text):
    """Each relative link of ``source`` (a path from the root) whose file or heading does not exist."""
    defects = []
    for match in LINK.finditer(_without_code(text)):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("mailto:"):
            continue
        path, _hash, fragment = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
        if not os.path.exists(os.path.join(ROOT, resolved)):
            defects.append("%s: %s (no file %s)" % (source, target, resolved))
            continue
        if fragment and resolved.endswith(".md") and fragment not in anchors(_read(resolved)):
            defects.append("%s: %s (no heading #%s in %s)" % (source, target, fragment, resolved))
    return defects


@pytest.mark.parametrize("source", markdown_files())
def test_every_relative_link_names_a_file_and_heading_that_exist(source):
    defects = link_defects(source, _read(source))
    assert not defects, "\n".join(defects)


def test_the_link_check_fails_on_a_real_defect():
    assert link_defects("README.md", "[x](docs/nothing-here.md)")
    assert link_defects("README.md", "[x](docs/testing.md#no-such-heading)")
    assert link_defects("docs/testing.md", "[x](#no-such-heading)")
    assert not link_defects("docs/testing.md", "[x](testing.md#how-long-it-takes) [y](../README.md)")


def test_the_anchor_rule_is_githubs():
    assert anchor("A platform team's cluster, end to end (`tests/integration/test_96_platform.py`)") == \
        "a-platform-teams-cluster-end-to-end-testsintegrationtest_96_platformpy"
    assert anchor("Scale (make bench-scale)") == "scale-make-bench-scale"
    assert anchor("The device door, node side") == "the-device-door-node-side"
    assert anchors("# Tests\n## Tests\n") == {"tests", "tests-1"}
