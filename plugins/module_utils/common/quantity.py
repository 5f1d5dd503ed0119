# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Kubernetes resource quantities (resource.Quantity) as numbers. Pure logic."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(value):
    """Return ``value`` (str or number, e.g. ``"1Ti"``, ``"500m"``, ``8``) as a Decimal in base units.

    Raises ValueError naming the value when it is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError("%r is not a Kubernetes quantity" % (value,))
    if isinstance(value, (int, float, Decimal)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError("%r is not a Kubernetes quantity" % (value,))
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise ValueError("%r is not a Kubernetes quantity" % (value,))
    return number * _SUFFIXES[match.group(2) or ""]


def format_cpu(millicores):
    """Canonical CPU quantity of ``millicores`` (int): whole cores as ``"96"``, else ``"1500m"``.

    The API server keeps custom resources' quantities as written, so fairgpu writes the canonical form: a
    second apply of the same value then changes nothing.
    """
    millicores = int(millicores)
    return format_count(millicores // 1000) if millicores % 1000 == 0 else "%dm" % millicores


def format_memory(size):
    """Canonical memory quantity of ``size`` bytes (int): the largest binary suffix that divides it exactly
    (``"512Gi"``, ``"1536Mi"``), else plain bytes; ``"0"`` for zero."""
    size = int(size)
    if size == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = int(_SUFFIXES[suffix])
        if size % unit == 0:
            return "%d%s" % (size // unit, suffix)
    return "%d" % size


_DECIMAL_SUFFIXES = ("", "k", "M", "G", "T", "P", "E")


def format_count(value):
    """A whole number as apimachinery's ``resource.Quantity`` writes it back (DecimalSI canonical form): the
    largest decimal suffix that keeps it whole, ``1000`` -> ``1k``, ``1500`` -> ``1500``, ``2000000`` -> ``2M``
    (k8s.io/apimachinery/pkg/api/resource/quantity.go, ``CanonicalizeBytes``). ``value``: an int."""
    value = int(value)
    index = 0
    while value and value % 1000 == 0 and index < len(_DECIMAL_SUFFIXES) - 1:
        value //= 1000
        index += 1
    return "%d%s" % (value, _DECIMAL_SUFFIXES[index])
