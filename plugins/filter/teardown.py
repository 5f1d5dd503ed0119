# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of fairgpu.tenancy's teardown: thin wrappers over plugins/module_utils/teardown/plan.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown import plan as teardown


class FilterModule(object):
    def filters(self):
        return {
            "teardown_queries": teardown.queries,
            "teardown_plan": teardown.teardown_plan,
            "kubeconfig_server": teardown.kubeconfig_server,
            "teardown_local_webhook": teardown.local_webhook_prefix,
        }
