from decimal import Decimal

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.quantity import format_cpu, format_memory, parse_quantity


@pytest.mark.parametrize("value, expected", [
    ("1Ti", 2 ** 40), ("500m", Decimal("0.5")), ("96", 96), (8, 8), ("1.5Gi", 3 * 2 ** 29), ("2k", 2000), ("1e3", 1000),
])
def test_parse(value, expected):
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", ["lots", "1Xi", True, "", "1.2.3"])
def test_reject(value):
    with pytest.raises(ValueError):
        parse_quantity(value)


@pytest.mark.parametrize("millicores, text", [(96000, "96"), (1500, "1500m"), (0, "0")])
def test_format_cpu(millicores, text):
    assert format_cpu(millicores) == text


@pytest.mark.parametrize("size, text", [(2 ** 40, "1Ti"), (1536 * 2 ** 20, "1536Mi"), (0, "0"), (1000, "1000")])
def test_format_memory(size, text):
    assert format_memory(size) == text
