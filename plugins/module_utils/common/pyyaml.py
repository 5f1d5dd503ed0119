# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""PyYAML for the module_utils that read or write YAML, imported so that importing them never fails.

fairgpu's YAML work (rendered manifests, rule files) runs in filter plugins on the controller, where PyYAML
comes with ansible-core. A module that imports one of these files on a host without PyYAML still loads, and
gets the usual "missing required library" message only if it reaches YAML.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import missing_required_lib

try:
    import yaml
except ImportError:
    yaml = None


def require():
    """The ``yaml`` module, or ImportError with Ansible's message for a missing library."""
    if yaml is None:
        raise ImportError(missing_required_lib("PyYAML"))
    return yaml
