#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_smi_mig_info
short_description: Read a node's MIG state from nvidia-smi and check it against a mig-parted layout
version_added: 0.1.0
description:
  - Reads C(nvidia-smi -L), C(nvidia-smi mig -lgi), C(nvidia-smi mig -lci), C(nvidia-smi mig -lgip), C(nvidia-smi
    mig -lgipp) and C(nvidia-smi --query-gpu=index,name,uuid,mig.mode.current,mig.mode.pending,memory.total
    --format=csv), or the full C(nvidia-smi) table in place of the query. It returns the GPU / GPU instance /
    compute instance tree, the MIG mode of each GPU, the MIG devices per profile, and the resources the NVIDIA
    device plugin exposes for that state under the C(single) and C(mixed) strategies.
  - Reading the state needs no built-in GPU catalogue; any profile name the driver prints is taken as it is. Resource
    names follow the device plugin (C(nvidia.com/mig-) and the profile with C(+) as C(.)), matched to the node's
    C(mig -lgip) rows by profile ID, with the memory figure computed as the device plugin does.
  - "The outputs come from one of three sources, in this order. O(outputs) gives them directly. O(node) reads
    them from a simulated node of the embedded cluster (annotation C(fairgpu.io/simulated-nvidia-smi), written by
    C(fairgpu.tenancy.simulated_gpu_node)). Otherwise the module runs O(nvidia_smi) where it runs: on a GPU host,
    or with C(delegate_to) a host that can run it, or inside the GPU Operator's driver pod through
    C(kubernetes.core.k8s_exec), whose stdout can be passed as O(outputs)."
  - With O(expected_config) and O(expected_name) it reports whether the node carries that layout.
  - Read-only; check mode runs it in full.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  outputs:
    description:
      - nvidia-smi stdout by command, keys C(-L) (required), C(mig -lgi), C(mig -lci), C(mig -lgip), C(mig -lgipp),
        the query command above, and C(nvidia-smi) for the full table.
      - Answers such as C(No MIG-enabled devices found.) are states, not errors.
    type: dict
  node:
    description: A simulated node of the embedded cluster whose nvidia-smi outputs to read.
    type: str
  nvidia_smi:
    description: The nvidia-smi command to run when neither O(outputs) nor O(node) is given.
    type: path
    default: nvidia-smi
  expected_config:
    description: A mig-parted config (C(version), C(mig-configs)) to check the node against.
    type: dict
  expected_name:
    description: The config of O(expected_config) the node should carry (its C(nvidia.com/mig.config) label).
    type: str
requirements:
  - kubernetes >= 24.2.0 (only with O(node); the other two ways run on a host without it)
"""

EXAMPLES = r"""
- name: Check a simulated node against fairgpu's layout
  fairgpu.tenancy.nvidia_smi_mig_info:
    node: gpu-node-0
    expected_config: "{{ mig_config_document }}"
    expected_name: fairgpu-2x2g.20gb
  register: mig

- name: On a GPU host
  fairgpu.tenancy.nvidia_smi_mig_info:
  delegate_to: gpu-host-1
"""

RETURN = r"""
product:
  description: The GPU model as GFD names it (C(nvidia.com/gpu.product) without MIG), e.g. C(NVIDIA-H100-80GB-HBM3).
  returned: always
  type: str
gpus:
  description: The tree of GPUs, their GPU instances and those instances' compute instances (MIG devices).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The GPU's index.
      type: int
    name:
      description: The GPU's name as nvidia-smi prints it.
      type: str
    uuid:
      description: The GPU's UUID.
      type: str
    gpu_instances:
      description:
        - Its GPU instances sorted by ID, each C(id), C(profile), C(profile_id), C(placement) (C(start) and C(size)
          in memory slices, or null without C(mig -lgi)) and C(compute_instances).
        - Each compute instance has C(id), C(profile), C(profile_id) and the C(uuid) of its MIG device.
      type: list
      elements: dict
  sample:
    - index: 0
      name: NVIDIA H100 80GB HBM3
      uuid: GPU-5a7d2c3e-0f1b-4c8a-9e6d-2b3c4d5e6f70
      gpu_instances:
        - id: 3
          profile: 2g.20gb
          profile_id: 14
          placement: {start: 0, size: 2}
          compute_instances:
            - {id: 0, profile: 2g.20gb, profile_id: 1, uuid: MIG-0c1d2e3f-4a5b-5c6d-8e7f-9a0b1c2d3e4f}
mig_enabled:
  description: Per GPU index, whether MIG is enabled.
  returned: always
  type: list
  elements: bool
layout:
  description:
    - Per GPU index, its MIG devices per profile; an empty mapping for MIG enabled without devices, null for MIG
      disabled.
  returned: always
  type: list
  elements: dict
  sample: [{"2g.20gb": 2, "3g.40gb": 1}, {}, null]
profile_counts:
  description: MIG devices on the node per profile.
  returned: always
  type: dict
  sample: {"2g.20gb": 16}
resources:
  description: "The device plugin's resources for this state, C({single: {name: count}, mixed: {name: count}})."
  returned: always
  type: dict
  sample: {"single": {"nvidia.com/gpu": 16}, "mixed": {"nvidia.com/gpu": 0, "nvidia.com/mig-2g.20gb": 16}}
matches:
  description: Whether every GPU carries the layout of O(expected_name).
  returned: with O(expected_config)
  type: bool
mismatches:
  description: One message per GPU that differs from the expected layout.
  returned: with O(expected_config)
  type: list
  elements: str
profiles_source:
  description:
    - Where the node's MIG profiles came from, C(node report) (its C(mig -lgip)) or C(catalogue) (the built-in one,
      used only to check O(expected_config) when no C(mig -lgip) was given); null when nothing needed them.
  returned: always
  type: str
table:
  description: The full C(nvidia-smi) table parsed (driver, GPUs with MIG mode and memory, MIG devices, processes).
  returned: when the C(nvidia-smi) output is given
  type: dict
outputs:
  description: The nvidia-smi outputs read, by command.
  returned: always
  type: dict
"""

import copy
import json

from ansible.module_utils.basic import AnsibleModule as BasicModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.info import COMMANDS, OPTIONAL_COMMANDS, mig_info
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.layout import MigLayoutError
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig.nvidia_smi import NvidiaSmiParseError
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import SIMULATED_NVIDIA_SMI_ANNOTATION as NVIDIA_SMI_ANNOTATION


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        outputs=dict(type="dict"),
        node=dict(type="str"),
        nvidia_smi=dict(type="path", default="nvidia-smi"),
        expected_config=dict(type="dict"),
        expected_name=dict(type="str"),
    )
    return spec


MODULE_ARGS = dict(argument_spec=argspec(), supports_check_mode=True, mutually_exclusive=[("outputs", "node")],
                   required_together=[("expected_config", "expected_name")])


def from_node(module):
    """The simulated node's outputs, read through the Kubernetes API. Only this path needs the kubernetes library:
    AnsibleK8SModule (built here, on the same arguments) fails with the install hint when it is missing."""
    # Imported here so that a GPU host without the kubernetes library can run the other two paths.
    from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException

    k8s_module = AnsibleK8SModule(module_class=AnsibleModule, **MODULE_ARGS)
    name = module.params["node"]
    try:
        from kubernetes.dynamic.exceptions import DynamicApiError
        client = get_api_client(k8s_module)
        node = client.get(client.resource("Node", "v1"), name=name).to_dict()
    except DynamicApiError as exc:
        module.fail_json(msg="cannot read node %r: %s %s" % (name, exc.status, exc.reason))
    except CoreException as exc:
        k8s_module.fail_from_exception(exc)
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(NVIDIA_SMI_ANNOTATION)
    if raw is None:
        module.fail_json(msg="node %r has no annotation %s: it is not a simulated node whose GPUs were published by "
                             "simulated_gpu_node; on a real node give outputs or run nvidia-smi" % (name, NVIDIA_SMI_ANNOTATION))
    return json.loads(raw)


def from_command(module):
    """Run nvidia-smi on this host. ``-L`` must succeed; the other commands exit non-zero on a GPU without MIG or
    on a driver that lacks them, and their stdout (e.g. "No MIG-enabled devices found.") is the answer."""
    nvidia_smi = module.get_bin_path(module.params["nvidia_smi"]) or module.params["nvidia_smi"]
    outputs = {}
    for command in COMMANDS + OPTIONAL_COMMANDS:
        try:
            rc, stdout, stderr = module.run_command([nvidia_smi] + command.split())
        except OSError as exc:  # run_command reports a missing binary through fail_json; this is a safety net
            module.fail_json(msg="cannot run %s: %s" % (nvidia_smi, exc))
        if rc != 0 and command == "-L":
            module.fail_json(msg="%s -L failed (rc %d): %s" % (nvidia_smi, rc, (stderr or stdout).strip()))
        if rc == 0 or stdout.strip():
            outputs[command] = stdout
    return outputs


def main():
    # A plain AnsibleModule: the outputs and command paths run on a bare GPU host (no kubernetes library).
    module = BasicModule(**MODULE_ARGS)
    params = module.params
    if params["outputs"] is not None:
        outputs = params["outputs"]
    elif params["node"]:
        outputs = from_node(module)
    else:
        outputs = from_command(module)
    try:
        result = mig_info(outputs, params["expected_config"], params["expected_name"])
    except (NvidiaSmiParseError, MigLayoutError) as exc:
        module.fail_json(msg=str(exc), outputs=outputs)
    module.exit_json(changed=False, outputs=outputs, **result)


if __name__ == "__main__":
    main()
