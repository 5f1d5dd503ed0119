"""The unknown-field check every inventory mapping gets (plugins/module_utils/common/fields.py)."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.fields import unknown_field_errors


def test_unknown_fields_are_named_sorted_with_the_known_ones_in_their_order():
    assert unknown_field_errors("pools[0]", {"name": "a", "zeta": 1, 2: 3, "alpha": 0}, ("name", "count")) == [
        "pools[0].2: unknown field; known fields are name, count",
        "pools[0].alpha: unknown field; known fields are name, count",
        "pools[0].zeta: unknown field; known fields are name, count"]
    assert unknown_field_errors("x", {"name": "a"}, ("name",)) == []
