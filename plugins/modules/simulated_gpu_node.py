#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: simulated_gpu_node
short_description: Publish a simulated node's GPUs as the NVIDIA device plugin and GPU feature discovery would
version_added: 0.1.0
description:
  - The embedded cluster's stand-in for the node-level parts of the NVIDIA GPU Operator. It reads the
    simulated hardware of a kwok node (annotations C(fairgpu.io/simulated-gpu-product),
    C(fairgpu.io/simulated-gpu-count) and optionally C(fairgpu.io/simulated-gpu-memory-mib), written by the
    C(fairgpu.tenancy.lab_cluster) role) and sets what the real components set on a GPU node. The lab's role
    C(fairgpu.tenancy.lab_gpu_operator) runs it.
  - Like the device plugin through the kubelet, C(status.capacity) and C(status.allocatable) get
    C(nvidia.com/gpu) (whole GPUs, an integer count).
  - Like GPU feature discovery, C(metadata.labels) get C(nvidia.com/gpu.product), C(.count), C(.memory) (MiB),
    C(.present), C(.family), C(.compute.major/minor), C(nvidia.com/mig.capable) and C(nvidia.com/mig.strategy),
    with the value shapes of real GFD label sets.
  - A node the lab's simulated MIG manager partitioned (annotation C(fairgpu.io/simulated-mig-layout),
    files/lab/mig_manager_sim.py) keeps its layout; its resources and labels follow the strategy, as the device
    plugin and GFD publish them. C(single) counts MIG devices as C(nvidia.com/gpu) (C(<model>-MIG-INVALID) for a
    layout unfit for it). C(mixed) gives C(nvidia.com/mig-<profile>) per profile. The node's C(nvidia-smi) outputs,
    in the real formats, go to annotation C(fairgpu.io/simulated-nvidia-smi).
  - Only those keys are touched; other labels and resources stay as they are, except the accelerator resources
    and GFD labels of an earlier layout, which are removed. Check mode and diff mode report exactly what would
    change.
  - Never use it on a real cluster, where the GPU Operator owns these fields (role C(gpu_operator), mode C(helm)).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: Name of the simulated node. One of O(name) and O(names) is required.
    type: str
  names:
    description:
      - Names of several simulated nodes, handled one after the other in this one module run (each as O(name)
        would be). On a large embedded cluster this replaces a loop of one module run per node (about 1 s of
        process start-up each on a 2-core machine; 1,000 nodes took over half an hour under load).
      - The result then has RV(nodes), one entry per node, and C(changed) is true when any node changed. The
        first node that cannot be read or patched fails the run, naming it; the nodes before it stay published.
    type: list
    elements: str
    version_added: 0.2.0
  mig_strategy:
    description:
      - The GPU Operator's C(mig.strategy). C(none) leaves out the C(nvidia.com/mig.strategy) label, as GFD does.
    type: str
    choices: [none, single, mixed]
    default: single
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
"""

EXAMPLES = r"""
- name: Publish the GPUs of a simulated node
  fairgpu.tenancy.simulated_gpu_node:
    kubeconfig: ~/.local/share/fairgpu/clusters/fairgpu/kubeconfig.yaml
    name: gpu-node-0
    mig_strategy: single

- name: Publish the GPUs of several simulated nodes in one module run
  fairgpu.tenancy.simulated_gpu_node:
    names: [gpu-node-0, gpu-node-1]
    mig_strategy: single
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: with O(name)
  type: str
  sample: gpu-node-0
nodes:
  description: With O(names), one entry per node with the keys RV(node), C(changed), RV(labels), RV(resources)
    (and RV(diff) in diff mode) as a run with O(name) returns them.
  returned: with O(names)
  type: list
  elements: dict
  version_added: 0.2.0
labels:
  description: The GFD labels the node carries after the call (label name to string value).
  returned: success
  type: dict
  sample: {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
resources:
  description: Extended resources set in both capacity and allocatable (resource name to integer count).
  returned: success
  type: dict
  sample: {"nvidia.com/gpu": 8}
diff:
  description: With C(--diff), the labels, capacity and allocatable before and after (only the keys this module owns);
    with O(names), C(before) and C(after) map each node's name to its own.
  returned: when diff mode is on
  type: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import (
    SimulatedNodeError,
    desired_node,
    node_patches,
)

try:
    from kubernetes.client.api import core_v1_api
    from kubernetes.client.exceptions import ApiException
except ImportError:
    # AnsibleK8SModule reports the missing library.
    pass


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str"),
        names=dict(type="list", elements="str"),
        mig_strategy=dict(type="str", choices=["none", "single", "mixed"], default="single"),
    )
    return spec


class NodeFailure(Exception):
    """One node could not be read, computed or patched; ``node`` names it."""

    def __init__(self, node, msg):
        super(NodeFailure, self).__init__(msg)
        self.node = node


def publish(module, api, name):
    """Publish one node's GPUs; returns its result dict (with its diff), or raises NodeFailure."""
    try:
        node = api.read_node(name=name).to_dict()
    except ApiException as exc:
        raise NodeFailure(name, "cannot read node %r: %s %s" % (name, exc.status, exc.reason))
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    annotations, current_labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    try:
        desired = desired_node(name, annotations, current_labels, module.params["mig_strategy"])
    except SimulatedNodeError as exc:
        raise NodeFailure(name, "node %r: %s" % (name, exc))
    labels, resources = desired["labels"], desired["resources"]
    label_patch, status_patch, diff = node_patches(current_labels, status, labels, resources)
    annotation_patch = {k: v for k, v in desired["annotations"].items() if annotations.get(k) != v}
    changed = bool(label_patch or status_patch or annotation_patch)
    if changed and not module.check_mode:
        try:
            if status_patch:
                api.patch_node_status(name=name, body={"status": status_patch})
            if label_patch or annotation_patch:
                api.patch_node(name=name, body={"metadata": {"labels": label_patch, "annotations": annotation_patch}})
        except ApiException as exc:
            raise NodeFailure(name, "cannot patch node %r: %s %s" % (name, exc.status, exc.reason))
    return dict(changed=changed, node=name, labels=labels, resources=resources, diff=diff)


def run(module, api):
    single = module.params["name"] is not None
    names = [module.params["name"]] if single else module.params["names"]
    results = []
    for name in names:
        try:
            results.append(publish(module, api, name))
        except NodeFailure as exc:
            extra = {} if single else {"nodes": [_without_diff(module, r) for r in results]}
            module.fail_json(msg=str(exc), node=exc.node, **extra)
    if single:
        result = results[0]
        if not module._diff:
            del result["diff"]
        module.exit_json(**result)
    result = dict(changed=any(r["changed"] for r in results), nodes=[_without_diff(module, r) for r in results])
    if module._diff:
        result["diff"] = {"before": {r["node"]: r["diff"]["before"] for r in results},
                          "after": {r["node"]: r["diff"]["after"] for r in results}}
    module.exit_json(**result)


def _without_diff(module, result):
    return result if module._diff else {k: v for k, v in result.items() if k != "diff"}


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True,
                              mutually_exclusive=[("name", "names")], required_one_of=[("name", "names")])
    try:
        client = get_api_client(module)
        run(module, core_v1_api.CoreV1Api(client.client.client))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
