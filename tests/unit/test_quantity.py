"""Quantities read and written as apimachinery does (k8s.io/apimachinery/pkg/api/resource).

The cases name where they come from in apimachinery's pkg/api/resource/quantity_test.go (commit eed236ce):
TestQuantityString and TestQuantityParseEmit give the input and the string it is written back as;
TestParseQuantity the large values and their canonical strings; TestQuantityParse gives the value a string parses
to (its rounding, capping and format), and the string here is that value written by the rules of quantity.go
(CanonicalizeBytes). The embedded API server's own answers for the same kind of values are checked in
tests/integration/test_25_quantities.py.
"""

import re
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import canonical_quantity, parse_quantity


@pytest.mark.parametrize("value, expected", [
    ("1Ti", 2 ** 40), ("500m", Decimal("0.5")), ("96", 96), (8, 8), ("1.5Gi", 3 * 2 ** 29), ("2k", 2000), ("1e3", 1000),
    ("5n", Decimal("5e-9")), ("4u", Decimal("4e-6")), ("1E", 10 ** 18), ("1E3", 1000), ("1.3E+6", 1300000),
    (".001", Decimal("0.001")), ("1.", 1), ("1.G", 10 ** 9), ("-1.5", Decimal("-1.5")), (0.5, Decimal("0.5")),
    ("0.5Mi", 2 ** 19), ("9Ei", 9 * 2 ** 60),  # parse_quantity is exact: no rounding, no cap
])
def test_parse(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [
    "lots", "1Xi", True, None, "", "1.2.3", ".", "+", "1e", "1e3k",
    # TestQuantityParse, invalid
    "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
    float("nan"), float("inf"), "1e5000",
])
def test_reject(value):
    with pytest.raises(ValueError):
        parse_quantity(value)
    with pytest.raises(ValueError):
        canonical_quantity(value)


CASES = [
    # --- what the issue names: weights, GPU and CPU counts ---
    (0.5, "500m"), ("0.5", "500m"), (1.5, "1500m"), (1, "1"), (1000, "1k"), (1500, "1500"), (2000000, "2M"),
    (0.0001, "100u"), (96, "96"), ("96000m", "96"), (10 ** 18, "1E"),
    # --- TestQuantityString (input, canonical; "alternate" inputs written back the same) ---
    ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("300Mi", "300Mi"), ("307200Ki", "300Mi"), ("6Ki", "6Ki"),
    ("1001Gi", "1001Gi"), ("1025024Mi", "1001Gi"), ("1Ti", "1Ti"), ("1024Gi", "1Ti"),
    ("1G", "1G"), ("1000M", "1G"), ("0.001T", "1G"), ("1m", "1m"), ("1000u", "1m"), ("80m", "80m"),
    ("1080m", "1080m"), ("1.08", "1080m"), ("1080000000n", "1080m"), ("300M", "300M"), ("1T", "1T"),
    ("1234567M", "1234567M"), ("3k", "3k"), ("1025", "1025"), ("0", "0"), ("00", "0"),
    ("1e9", "1e9"), (".001e12", "1e9"), ("1e-3", "1e-3"), ("0.001e0", "1e-3"), ("1e-9", "1e-9"),
    ("1000e-12", "1e-9"), ("80e-3", "80e-3"), ("300e6", "300e6"), ("1e12", "1e12"), ("1e3", "1e3"), ("3e3", "3e3"),
    ("1n", "1n"), ("80n", "80n"), ("1080n", "1080n"), ("1u", "1u"), ("80u", "80u"), ("1080u", "1080u"),
    # TestQuantityString: BinarySI values below 1024 and fractions are written as DecimalSI
    (5, "5"), ("5000m", "5"), ("0.5", "500m"),
    # --- TestQuantityParseEmit ---
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), (".001Ki", "1024m"), (".000001Ki", "1024u"), (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    # --- TestQuantityParse: the parsed value (rounded up to nano units, BinarySI capped at 2^63-1), written ---
    ("0n", "0"), ("0Ki", "0"), ("0Mi", "0"), ("50k", "50k"), ("40T", "40T"), ("300T", "300T"), ("12E", "12E"),
    ("100.035k", "100035"), ("10.035M", "10035k"), ("0.0005k", "500m"), ("0.00050k", "500m"), ("0.05000", "50m"),
    ("0.5e0", "500e-3"), ("0.5e-1", "50e-3"), ("1.2e3", "1200"), ("1.3E+6", "1300e3"), ("1.40e9", "1400e6"),
    ("1.53E12", "1530e9"), ("1E6", "1e6"), ("1e14", "100e12"), ("1e13", "10e12"),
    ("8.1k", "8100"), ("7.123456M", "7123456"), ("5.444T", "5444G"), ("2.5P", "2500T"), ("1.01E", "1010P"),
    ("3.001n", "4n"), ("1.1E-9", "2e-9"), ("0.0000000001", "1n"), ("0.0000000005", "1n"), ("0.9n", "1n"),
    ("0.00000012345", "124n"), ("0.00000012354", "124n"),
    ("9Ei", "9223372036854775807"), ("9223372036854775807Ki", "9223372036854775807"),
    ("100.035Ki", "102435840m"), ("0.5Mi", "512Ki"), ("0.05Gi", "53687091200m"), ("0.025Ti", "27487790694400m"),
    ("0.000000000001Ki", "2n"), (".0001k", "100m"), ("1.", "1"), ("1.G", "1G"),
    # --- TestParseQuantity: large values ---
    ("999999999999999999", "999999999999999999"), ("999999999999999999.1", "999999999999999999100m"),
    ("1000000000000000000", "1E"), ("1.0E", "1E"), ("9999999999999999999000m", "9999999999999999999"),
    ("1.0000000000000000001E", "1000000000000000000100m"), ("1.000000000000000001E", "1000000000000000001"),
    ("10E", "10E"), ("10000000000000000000.0", "10E"), ("10000000000000000000000m", "10E"),
    ("9223372036854775807", "9223372036854775807"), ("9223372036854775808.1", "9223372036854775808100m"),
    # negative values: "-" and the magnitude's form (TestQuantityString's negated table, TestParseQuantity)
    ("-1Gi", "-1Gi"), ("-1080m", "-1080m"), ("-1.5", "-1500m"), (-1000, "-1k"), ("-.001Ki", "-1024m"),
    ("-1E", "-1E"), ("-9223372036854775809.1", "-9223372036854775809100m"), ("-9Ei", "-9223372036854775807"),
    ("-0", "0"),
]


@pytest.mark.parametrize("value, text", CASES)
def test_canonical_form(value, text):
    assert canonical_quantity(value) == text


@pytest.mark.parametrize("value, text", [
    # a number of bytes is BinarySI: the largest binary suffix dividing it exactly, DecimalSI below 1024
    (2 ** 40, "1Ti"), (1536 * 2 ** 20, "1536Mi"), (0, "0"), (1000, "1k"), (1023, "1023"), (1024, "1Ki"),
    (1025, "1025"), (64 * 10 ** 9, "62500000Ki"), (2 ** 63, "9223372036854775807"), (1.5, "1500m"),
    # a string keeps its own format, binary or not
    ("64G", "64G"), ("1.5Gi", "1536Mi"),
])
def test_bytes_are_binary(value, text):
    assert canonical_quantity(value, binary=True) == text


@pytest.mark.parametrize("value, text", [
    # A built-in object's resource list is rounded up to milli units by the API server's defaulting
    # (kubernetes/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_ResourceList: RoundUp(-3), which rounds away
    # from zero as TestQuantityRoundUp shows for -9.01); the embedded API server stores these in a ResourceQuota.
    ("100u", "1m"), ("0.0001", "1m"), ("3.001n", "1m"), ("0.00000012345", "1m"), ("100.0355", "100036m"),
    ("1080000000n", "1080m"), ("9.0001", "9001m"), ("-9.0001", "-9001m"), ("1e-9", "1e-3"), ("0", "0"),
    ("1.5Gi", "1536Mi"), (".000001Ki", "2m"), (0.5, "500m"), (1000, "1k"),
])
def test_resource_lists_round_up_to_milli_units(value, text):
    assert canonical_quantity(value, milli=True) == text


@pytest.mark.parametrize("value", ["1000E", 10 ** 21, "1000000P", "-1000E", 1e21])
def test_values_apimachinery_cannot_write_are_refused(value):
    # quantity.go CanonicalizeBytes asks suffix.go constructBytes for the suffix of 10^21 and gets none: "1000E" is
    # written "1". fairgpu refuses such a value instead of writing one the API server would change.
    with pytest.raises(ValueError, match="cannot write"):
        canonical_quantity(value)


@pytest.mark.parametrize("value, text", [("1e21", "1e21"), ("1000e18", "1e21"), ("1e-12", "1e-9")])
def test_decimal_exponent_has_no_such_limit(value, text):
    # DecimalExponent has no suffix table: any exponent is written (suffix.go, constructBytes); values below 1n
    # still round up to it.
    assert canonical_quantity(value) == text


# --- properties ----------------------------------------------------------------------------------------------
# What the API server keeps unchanged (quantity.go ParseQuantity reuses the string as written) is a canonical
# DecimalSI/DecimalExponent mantissa without a leading zero or a trailing "000", or a BinarySI one not divisible
# by 1024: the forms below.
CANONICAL = re.compile(r"^(0|-?[1-9][0-9]*(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e-?[0-9]+)?)$")

amounts = st.builds(lambda mantissa, exponent, negative: Decimal(-mantissa if negative else mantissa).scaleb(exponent),
                    st.integers(min_value=0, max_value=10 ** 20), st.integers(min_value=-9, max_value=15), st.booleans())


@settings(max_examples=300, deadline=None)
@given(amounts)
def test_canonical_form_reads_back_as_the_same_value(amount):
    try:
        text = canonical_quantity(amount)
    except ValueError:
        # only a multiple of 10^21 has no DecimalSI suffix
        assert amount % Decimal(10) ** 21 == 0 and amount != 0
        return
    assert parse_quantity(text) == amount
    assert CANONICAL.match(text), text
    assert not re.match(r"^-?[0-9]*000(n|u|m|k|M|G|T|P|E)?$", text), text
    assert canonical_quantity(text) == text


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2 ** 63 - 1), max_value=2 ** 63 - 1), st.integers(min_value=0, max_value=6))
def test_binary_form_reads_back_as_the_same_value(size, shift):
    size = (1 if size >= 0 else -1) * (abs(size) >> (10 * shift) << (10 * shift))  # also multiples of Ki, Mi, ...
    text = canonical_quantity(size, binary=True)
    assert parse_quantity(text) == size
    assert canonical_quantity(text) == text
    if text.endswith("i"):
        mantissa = int(text[:-2])
        assert abs(size) >= 1024 and mantissa % 1024 != 0


@settings(max_examples=200, deadline=None)
@given(amounts, st.sampled_from(["e", "", "Ki"]))
def test_every_format_is_a_fixed_point(amount, form):
    # whatever was written, writing the canonical form again changes nothing (the second run stays unchanged)
    text = format(amount, "f") + ("e0" if form == "e" else form)
    try:
        once = canonical_quantity(text)
    except ValueError:
        return
    assert canonical_quantity(once) == once
    assert parse_quantity(once) == parse_quantity(canonical_quantity(text))
