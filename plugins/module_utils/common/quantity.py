# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Kubernetes resource quantities (``resource.Quantity``): read as numbers, written in canonical form. Pure logic.

Every quantity fairgpu writes into an object (ClusterQueue quotas and weight, ResourceQuota, LimitRange, node
capacity) goes through ``canonical_quantity``: the string the API server writes back for it. The API server
re-encodes the quantities of built-in objects, and Kueue's webhook those of a ClusterQueue on create, but a later
apply keeps what was written, so writing anything else than the canonical form shows as a change on every run.

The rules are apimachinery's, k8s.io/apimachinery/pkg/api/resource (files named below, read at commit
eed236ceee2c19c2753a3d93ac0631dc20750454):

* grammar: ``<sign><number><suffix>``, the suffix one of the BinarySI ``Ki Mi Gi Ti Pi Ei``, the DecimalSI
  ``n u m "" k M G T P E`` or a DecimalExponent ``e<int>``/``E<int>``; a bare ``E`` is exa (quantity.go, the
  ``Quantity`` comment; suffix.go, ``newSuffixer`` and ``interpret``).
* a quantity remembers its format (the kind of suffix it was written with) and is written back in it
  (quantity.go, ``Quantity`` comment).
* parsing rounds the magnitude UP to a whole number of nano units, so anything non-zero stays non-zero; a
  BinarySI magnitude above 2^63-1 is capped there (quantity.go, ``ParseQuantity``).
* zero is ``"0"`` whatever its format (quantity.go, ``CanonicalizeBytes``).
* BinarySI is kept only for whole values of magnitude 1024 or more; it is then the mantissa over the largest
  power of 1024 that divides it exactly (``"1536Mi"``, ``"1025"``). Fractions and values in (-1024, 1024) are
  written as DecimalSI (quantity.go, ``CanonicalizeBytes``; amount.go, ``AsCanonicalBase1024Bytes``).
* DecimalSI and DecimalExponent: the integer mantissa with the largest exponent that is a multiple of 3 and
  keeps it whole (``0.5`` -> ``500m``, ``1000`` -> ``1k``, ``1500`` -> ``1500``); DecimalSI names the exponent
  with its suffix, DecimalExponent writes ``e<exponent>`` (none for 0) (amount.go, ``AsCanonicalBytes``;
  suffix.go, ``constructBytes``).
* a negative quantity is ``-`` and the canonical form of its magnitude (quantity_test.go, ``TestQuantityString``).
* a DecimalSI exponent above 18 has no suffix: suffix.go ``constructBytes`` finds none and ``CanonicalizeBytes``
  writes the bare mantissa, so ``"1000E"`` is stored as ``"1"``. ``canonical_quantity`` refuses such a value.

One rule is the API server's, not apimachinery's: every ``v1.ResourceList`` of a built-in object (a ResourceQuota's
``spec.hard``, a LimitRange's limits, a container's requests and limits, a node's capacity and allocatable) is
rounded up, away from zero, to whole milli units by defaulting (kubernetes/kubernetes pkg/apis/core/v1/defaults.go,
``SetDefaults_ResourceList``, calling quantity.go ``RoundUp(-3)``): ``100u`` is stored as ``1m`` there.
``canonical_quantity(value, milli=True)`` writes such a field; a custom resource's quantities (a ClusterQueue's
quotas and weight) are not rounded.

Not mirrored: ``ParseQuantity`` keeps the string as written when it merely looks canonical (no trailing
``000``, no leading zero digit, an exponent that is a multiple of 3), so ``"+1"``, ``"01"``, ``"1.500"`` or
``"1E6"`` come back from the API server as written (as the embedded API server shows,
tests/integration/test_25_quantities.py). The canonical forms written here come back unchanged too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from decimal import Decimal

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

# suffix.go, newSuffixer: the exponents of the decimal suffixes (base 10) and of the binary ones (base 2).
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES = dict((exponent, suffix) for suffix, exponent in _DECIMAL_EXPONENTS.items())
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# quantity.go, ParseQuantity: "The max is just a simple cap" (maxAllowed, 2^63-1), for BinarySI only.
_MAX_BINARY = 2 ** 63 - 1
# Far beyond any resource; keeps the exact integer arithmetic below small (apimachinery allows an int32).
_MAX_EXPONENT = 1000
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>[numkMGTPE]|[KMGTPE]i))?$")


def _invalid(value):
    return ValueError("%r is not a Kubernetes quantity" % (value,))


def _parse(value):
    """``value`` (str, int, float or Decimal) exactly, as ``(negative, mantissa, exponent, format)``: the value
    is ``(-1 if negative else 1) * mantissa * 10**exponent`` (ints, ``mantissa >= 0``) and the format one of
    ``DECIMAL_SI``, ``BINARY_SI``, ``DECIMAL_EXPONENT`` (numbers: ``DECIMAL_SI``). No rounding."""
    if isinstance(value, bool):
        raise _invalid(value)
    if isinstance(value, int):
        return value < 0, abs(value), 0, DECIMAL_SI
    if isinstance(value, (float, Decimal)):
        number = Decimal(repr(value)) if isinstance(value, float) else value
        if not number.is_finite():
            raise _invalid(value)
        sign, digits, exponent = number.as_tuple()
        if abs(exponent) > _MAX_EXPONENT:
            raise _invalid(value)
        return bool(sign), int("".join(str(d) for d in digits)), exponent, DECIMAL_SI
    if not isinstance(value, str):
        raise _invalid(value)
    match = _QUANTITY.match(value.strip())
    if not match or not (match.group("whole") or match.group("fraction")):
        raise _invalid(value)
    fraction = match.group("fraction") or ""
    mantissa, exponent = int((match.group("whole") or "") + fraction or "0"), -len(fraction)
    negative = match.group("sign") == "-"
    if match.group("exponent"):
        shift = int(match.group("exponent")[1:])
        if abs(shift) > _MAX_EXPONENT:
            raise _invalid(value)
        return negative, mantissa, exponent + shift, DECIMAL_EXPONENT
    suffix = match.group("suffix") or ""
    if suffix in _BINARY_EXPONENTS:
        return negative, mantissa * 2 ** _BINARY_EXPONENTS[suffix], exponent, BINARY_SI
    return negative, mantissa, exponent + _DECIMAL_EXPONENTS[suffix], DECIMAL_SI


def parse_quantity(value):
    """Return ``value`` (str or number, e.g. ``"1Ti"``, ``"500m"``, ``"1e3"``, ``8``, ``0.5``) as a Decimal in
    base units, exactly as written (no rounding to nano units).

    Raises ValueError naming the value when it is not a quantity (apimachinery's grammar, see the module
    docstring; surrounding whitespace is forgiven, exponents beyond +-1000 are refused).
    """
    negative, mantissa, exponent, _form = _parse(value)
    return Decimal((int(negative), tuple(int(d) for d in str(mantissa)), exponent))


def canonical_quantity(value, binary=False, milli=False):
    """The canonical string of quantity ``value``, as the API server writes it back (apimachinery's
    ``Quantity.String()``; the rules and their sources are in the module docstring).

    ``value``: a string (``"1.5Gi"``, ``"0.5"``, ``"1e3"``), whose suffix gives the format, or a number (int,
    float or Decimal, in base units: cores, bytes, devices), written as DecimalSI, or as BinarySI when
    ``binary`` is true (bytes). Examples: ``0.5`` -> ``"500m"``, ``1000`` -> ``"1k"``, ``"1.5Gi"`` ->
    ``"1536Mi"``, ``(1000, binary=True)`` -> ``"1k"`` (below 1024), ``"1e3"`` -> ``"1e3"``, ``1e-10`` -> ``"1n"``.
    ``milli``: round the magnitude up to whole milli units first, as the API server does for a built-in object's
    resource list (``("100u", milli=True)`` -> ``"1m"``, ``("100.0355", milli=True)`` -> ``"100036m"``).

    Raises ValueError for what is not a quantity, and for a value written as DecimalSI whose exponent would
    pass ``E`` (10^18), such as ``"1000E"``: apimachinery has no suffix for it and writes the mantissa alone
    (``"1"``), another value.
    """
    negative, mantissa, exponent, form = _parse(value)
    if binary and not isinstance(value, str):
        form = BINARY_SI
    # ParseQuantity: the magnitude rounded up to whole nano units (10^-9); a ResourceList's to milli units ...
    floor = -3 if milli else -9
    if exponent < floor:
        whole, rest = divmod(mantissa, 10 ** (floor - exponent))
        mantissa, exponent = whole + (1 if rest else 0), floor
    # ... and a BinarySI magnitude capped at 2^63-1.
    if form == BINARY_SI and (mantissa * 10 ** exponent if exponent >= 0 else
                              Decimal(mantissa).scaleb(exponent)) > _MAX_BINARY:
        mantissa, exponent = _MAX_BINARY, 0
    if mantissa == 0:
        return "0"
    sign = "-" if negative else ""
    if form == BINARY_SI:
        # CanonicalizeBytes: BinarySI only for whole magnitudes of 1024 and more, else DecimalSI.
        whole = exponent >= 0 or mantissa % 10 ** -exponent == 0
        size = (mantissa * 10 ** exponent if exponent >= 0 else mantissa // 10 ** -exponent) if whole else 0
        power = 0
        while size >= 1024 and size % 1024 == 0:
            size //= 1024
            power += 1
        if power:
            return "%s%d%s" % (sign, size, _BINARY_SUFFIXES[power])
        # No binary suffix fits: written without one, the string reads back as DecimalSI, so it is written in
        # DecimalSI's canonical form (15625000 -> 15625k), which reads back as itself.
        form = DECIMAL_SI
    # AsCanonicalBytes: factors of 10 into the exponent, then back until the exponent is a multiple of 3.
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if form == DECIMAL_EXPONENT:
        return "%s%d%s" % (sign, mantissa, "e%d" % exponent if exponent else "")
    if exponent not in _DECIMAL_SUFFIXES:
        raise ValueError("%r: apimachinery cannot write this quantity (%de%d has no DecimalSI suffix; it would "
                         "write %d)" % (value, mantissa, exponent, mantissa))
    return "%s%d%s" % (sign, mantissa, _DECIMAL_SUFFIXES[exponent])
