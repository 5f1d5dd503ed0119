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
    C(fairgpu.tenancy.cluster) role) and sets what the real components set on a GPU node.
  - Like the device plugin through the kubelet, C(status.capacity) and C(status.allocatable) get
    C(nvidia.com/gpu) (whole GPUs, an integer count).
  - Like GPU feature discovery, C(metadata.labels) get C(nvidia.com/gpu.product), C(.count), C(.memory) (MiB),
    C(.present), C(.family), C(.compute.major/minor), C(nvidia.com/mig.capable) and C(nvidia.com/mig.strategy),
    with the value shapes of real GFD label sets.
  - With O(mig_config), it is also the MIG manager. A node labelled C(nvidia.com/mig.config=<name>) goes through
    C(nvidia.com/mig.config.state=pending) to C(success) with the layout of config C(<name>). When that layout
    cannot be created on the node's GPUs, the state is C(failed) and the node keeps its previous layout, as the
    real manager does. The resources and labels then follow the strategy, as the device plugin and GFD publish
    them. C(single) counts MIG devices as C(nvidia.com/gpu) (C(<model>-MIG-INVALID) for a layout unfit for
    it). C(mixed) gives C(nvidia.com/mig-<profile>) per profile. The node's C(nvidia-smi) outputs, in the real
    formats, go to annotation C(fairgpu.io/simulated-nvidia-smi), and the layout to
    C(fairgpu.io/simulated-mig-layout).
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
    description: Name of the simulated node.
    type: str
    required: true
  mig_strategy:
    description:
      - The GPU Operator's C(mig.strategy). C(none) leaves out the C(nvidia.com/mig.strategy) label, as GFD does.
    type: str
    choices: [none, single, mixed]
    default: single
  mig_config:
    description:
      - The MIG manager's mig-parted config (C(version), C(mig-configs)), as in its ConfigMap's C(config.yaml).
        Omitted, MIG is off and the C(nvidia.com/mig.config) label is ignored.
    type: dict
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
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-node-0
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
mig_state:
  description: The MIG manager's C(nvidia.com/mig.config.state) after the call; null without a MIG config label.
  returned: success
  type: str
  sample: success
mig_errors:
  description: Why the selected MIG config could not be created (empty unless C(mig_state) is C(failed)).
  returned: success
  type: list
  elements: str
diff:
  description: With C(--diff), the labels, capacity and allocatable before and after (only the keys this module owns).
  returned: when diff mode is on
  type: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.simulated.node import (
    MIG_STATE_LABEL,
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
        name=dict(type="str", required=True),
        mig_strategy=dict(type="str", choices=["none", "single", "mixed"], default="single"),
        mig_config=dict(type="dict"),
    )
    return spec


def run(module, api):
    name = module.params["name"]
    try:
        node = api.read_node(name=name).to_dict()
    except ApiException as exc:
        module.fail_json(msg="cannot read node %r: %s %s" % (name, exc.status, exc.reason), node=name)
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    annotations, current_labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    try:
        desired = desired_node(name, annotations, current_labels, module.params["mig_strategy"],
                               module.params["mig_config"])
    except SimulatedNodeError as exc:
        module.fail_json(msg="node %r: %s" % (name, exc), node=name)
    labels, resources = desired["labels"], desired["resources"]
    label_patch, status_patch, diff = node_patches(current_labels, status, labels, resources)
    annotation_patch = {k: v for k, v in desired["annotations"].items() if annotations.get(k) != v}
    changed = bool(label_patch or status_patch or annotation_patch)
    if changed and not module.check_mode:
        try:
            if desired["mig_state"] and current_labels.get(MIG_STATE_LABEL) != desired["mig_state"]:
                # The MIG manager announces its work before it reconfigures the GPUs.
                api.patch_node(name=name, body={"metadata": {"labels": {MIG_STATE_LABEL: "pending"}}})
            if status_patch:
                api.patch_node_status(name=name, body={"status": status_patch})
            if label_patch or annotation_patch:
                api.patch_node(name=name, body={"metadata": {"labels": label_patch, "annotations": annotation_patch}})
        except ApiException as exc:
            module.fail_json(msg="cannot patch node %r: %s %s" % (name, exc.status, exc.reason), node=name)
    result = dict(changed=changed, node=name, labels=labels, resources=resources, mig_state=desired["mig_state"],
                  mig_errors=desired["errors"])
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        client = get_api_client(module)
        run(module, core_v1_api.CoreV1Api(client.client.client))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
