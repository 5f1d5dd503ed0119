# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Jinja2 filters of the lab's roles (the embedded cluster): thin wrappers over plugins/module_utils/lab and the
embedded API server's Pod Security configuration."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import kubelet as simulated_kubelet


class FilterModule(object):
    def filters(self):
        return {
            "kwok_stages": simulated_kubelet.kwok_stages,
            "pod_security_admission_configuration": pod_security.admission_configuration,
            "pod_security_admission_configuration_errors": pod_security.admission_configuration_errors,
        }
