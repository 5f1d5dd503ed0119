# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The pinned versions of ``files/lab/toolchain/versions.env``, the one place that names them. Pure logic.

The file is read as ``files/lab/toolchain/toolchain.sh`` reads it: ``NAME=value`` lines whose name is upper-case
letters and underscores, the value everything after the first ``=``; comments and other lines are skipped.
The roles read it through the ``fairgpu.tenancy.versions_env`` filter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

NAME_RE = re.compile(r"^[A-Z_]+$")


def versions_env(text):
    """``{NAME: value}`` of a versions.env text."""
    versions = {}
    for line in str(text).splitlines():
        name, equals, value = line.partition("=")
        if equals and NAME_RE.match(name):
            versions[name] = value
    return versions
