# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The check every inventory mapping gets: fields fairgpu does not know are named, not ignored. Pure logic."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def unknown_field_errors(at, mapping, known):
    """One message per key of ``mapping`` (a dict) that is not in ``known`` (a sequence, listed in its order),
    sorted, each naming ``<at>.<key>`` and the known fields."""
    return ["%s.%s: unknown field; known fields are %s" % (at, key, ", ".join(known))
            for key in sorted(str(k) for k in mapping if k not in known)]
