#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: drift_info
short_description: List, field by field, where live objects differ from what fairgpu applies
version_added: 0.1.0
description:
  - Reads each object of O(objects) from the cluster (one GET each, in one module run) and compares it with the
    object as fairgpu applies it, in the fields fairgpu sets and only those (plugins/module_utils/common/drift.py,
    C(subset_differences)). A field another field manager added is not a difference; a field fairgpu sets that holds
    another value, or is gone, is, whoever wrote it. Quantities compare by value and Go durations by length, so
    C(8) and C("8"), C("10m") and C("600s") are the same.
  - Read-only; never changes the cluster, so it runs in check mode as well. The role that applies the objects
    repairs the differences (server-side apply with C(force_conflicts), which takes the fields back from another
    manager) and reports RV(lines).
  - An object that is not on the cluster, or whose kind the API server does not serve (a CRD not installed yet), is
    listed in RV(missing), not as a difference.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  objects:
    description: The objects as fairgpu applies them (apiVersion, kind, metadata.name, metadata.namespace where
      namespaced, and the fields fairgpu sets).
    type: list
    elements: dict
    required: true
requirements:
  - kubernetes >= 24.2.0
"""

EXAMPLES = r"""
- name: Compare the live ClusterQueue with fairgpu's
  fairgpu.tenancy.drift_info:
    objects:
      - apiVersion: kueue.x-k8s.io/v1beta2
        kind: ClusterQueue
        metadata: {name: team-a}
        spec: {cohortName: gpus}
  register: drift

- name: Say what differs
  ansible.builtin.debug:
    msg: "{{ drift.lines }}"
"""

RETURN = r"""
differences:
  description: One entry per differing field.
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: C(<Kind>/<namespace>/<name>), or C(<Kind>/<name>) for a cluster-scoped object.
      type: str
    path:
      description: The field, dotted; C([i]) a list index, C([name=x]) the list item named x.
      type: str
    live:
      description: The live value (null when absent, see RV(differences.absent)).
      type: raw
    fairgpu:
      description: The value fairgpu applies.
      type: raw
    absent:
      description: C(live) when the live object lacks the field, else null.
      type: str
lines:
  description: "One line per difference, C(<object> <path>: live <value>, fairgpu <value>)."
  returned: always
  type: list
  elements: str
missing:
  description: The objects of O(objects) that are not on the cluster (fairgpu creates them), as C(<Kind>/...).
  returned: always
  type: list
  elements: str
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift

try:
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
except ImportError:
    # AnsibleK8SModule reports the missing library.
    NotFoundError = ResourceNotFoundError = Exception


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(objects=dict(type="list", elements="dict", required=True))
    return spec


def read(client, desired):
    """The live object of ``desired`` as a dict, or None when it (or its kind) is not on the cluster."""
    metadata = desired.get("metadata") or {}
    try:
        resource = client.resource(desired["kind"], desired["apiVersion"])
    except ResourceNotFoundError:
        return None
    try:
        found = client.get(resource, name=metadata["name"], namespace=metadata.get("namespace"))
    except NotFoundError:
        return None
    return found.to_dict()


def run(module, client):
    differences, missing = [], []
    for desired in module.params["objects"]:
        if not desired.get("apiVersion") or not desired.get("kind") or not (desired.get("metadata") or {}).get("name"):
            module.fail_json(msg="objects: every object needs apiVersion, kind and metadata.name; got %s"
                             % drift.object_key(desired))
        live = read(client, desired)
        if live is None:
            missing.append(drift.object_key(desired))
            continue
        differences.extend(drift.object_differences(live, desired))
    module.exit_json(changed=False, differences=differences, lines=drift.difference_lines(differences),
                     missing=missing)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        client = get_api_client(module)
        run(module, client)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
