#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: mig_layout
short_description: A MIG layout applied to the GPU nodes through the GPU Operator's MIG manager
version_added: 0.1.0
description:
  - The desired state of the GPU nodes' MIG partitions, in one module run. It reads the GPU nodes (O(node_selector)),
    checks the config O(config) of the mig-parted O(document) against every node's GPUs, and stops with every error
    before anything changes, one message per problem naming the node, its GPU model and what to change
    (plugins/module_utils/mig/nodes.py C(node_errors); the rules and their sources are in docs/mig.md).
  - With O(state=present) it then writes the document to the MIG manager's ConfigMap (key C(config.yaml),
    server-side apply, field manager C(fairgpu)), creating its namespace when missing (never changing one that
    exists), labels each node C(nvidia.com/mig.config=<config>) where the label differs, and waits until the MIG
    manager has answered on every node - applied, or failed (plugins/module_utils/mig/wait.py, with NVIDIA
    mig-parted's source of each state). A node's state from before its label changed is not an answer. It fails
    naming each node the MIG manager failed or did not finish within O(wait_timeout).
  - Check mode is a server-side dry run of the ConfigMap and of each label (kubernetes.core's client), with no wait;
    with C(--diff), RV(diff) holds the ConfigMap's change.
  - With O(state=checked) it only checks the layout, against O(nodes) when given (no cluster; the preflight's node
    pools) or the cluster's GPU nodes. With O(state=rendered) it returns the MIG manager's ConfigMap in RV(objects)
    and touches no cluster (C(render.yml)).
  - The configs the nodes' label does not select are not applied; what they would do wrong on these nodes is in
    RV(warnings), as are the nodes whose profiles cannot be known before MIG is on (a model the built-in catalogue
    lacks); the MIG manager judges those, and the caller checks the result from the nodes' reports.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  state:
    description:
      - C(present) applies the layout and waits for the MIG manager; C(checked) checks the layout only;
        C(rendered) builds the ConfigMap only.
    type: str
    choices: [present, checked, rendered]
    default: present
  document:
    description: The mig-parted document (C(version), C(mig-configs)) the MIG manager reads.
    type: dict
    required: true
  config:
    description: The config of O(document) the nodes' C(nvidia.com/mig.config) label selects.
    type: str
    required: true
  strategy:
    description: The GPU Operator's MIG strategy (chart value C(mig.strategy)), which decides the resources a node publishes.
    type: str
    choices: [single, mixed]
    default: single
  node_selector:
    description: The label selector of the GPU nodes to partition.
    type: str
    default: nvidia.com/gpu.present=true
  nodes:
    description:
      - The Node objects (API dicts) to check against, with O(state=checked) and no cluster. Omitted, the nodes of
        O(node_selector) are read.
    type: list
    elements: dict
  smi:
    description:
      - The nodes' own nvidia-smi outputs, a dict with C(lgip) (node name to the stdout of C(nvidia-smi mig -lgip), as
        the inventory gives it) and C(reports) (node name to the stdouts of C(-L), C(mig -lgip) and C(mig -lgipp),
        as the C(mig_config) role reads them through the GPU Operator's pods). A node's report is the authority over
        the built-in catalogue.
    type: dict
    default: {}
  configmap:
    description:
      - The MIG manager's ConfigMap, C({name, namespace}) (the GPU Operator's chart value C(migManager.config.name),
        in the operator's namespace). Required with O(state=present) and O(state=rendered).
    type: dict
  wait_timeout:
    description: Seconds to wait for the MIG manager on every node.
    type: int
    default: 600
  wait_interval:
    description: Seconds between two reads of the nodes.
    type: float
    default: 5
notes:
  - The MIG manager must be running before the labels change (it acts on a change of the label); on the embedded
    cluster the C(lab_mig_manager) role runs its simulation first.
"""

EXAMPLES = r"""
- name: Partition every GPU into two 2g.20gb instances
  fairgpu.tenancy.mig_layout:
    document:
      version: v1
      mig-configs:
        fairgpu-2x2g.20gb:
          - {devices: all, mig-enabled: true, mig-devices: {2g.20gb: 2}}
    config: fairgpu-2x2g.20gb
    strategy: mixed
    configmap: {name: fairgpu-mig-parted-config, namespace: gpu-operator}
"""

RETURN = r"""
nodes:
  description:
    - The GPU nodes as last read (after the MIG manager when O(state=present), not in check mode), API dicts; empty
      with O(state=rendered).
  returned: always
  type: list
  elements: dict
nodes_before:
  description: The GPU nodes as read before any label changed, API dicts.
  returned: always
  type: list
  elements: dict
progress:
  description:
    - The MIG manager's answer per node - C(done) (no node waiting), C(ready) (node names), C(failed) and C(waiting)
      (one message per node, with the reason). Empty in check mode and with O(state=checked).
  returned: always
  type: dict
  sample: {done: true, ready: [gpu-node-0, gpu-node-1], failed: [], waiting: []}
warnings:
  description:
    - What the configs not selected would do wrong on these nodes, and the nodes whose MIG profiles are unknown until
      MIG is on; also shown as warnings of the task.
  returned: always
  type: list
  elements: str
changed_objects:
  description: The objects the run changed (would change, in check mode), as C(Kind/namespace/name).
  returned: always
  type: list
  elements: str
  sample: [ConfigMap/gpu-operator/fairgpu-mig-parted-config, Node/gpu-node-0]
elapsed:
  description: Seconds the wait for the MIG manager took (0 when there was none).
  returned: always
  type: float
objects:
  description: With O(state=rendered), the MIG manager's ConfigMap holding the document (key C(config.yaml)).
  returned: when state is rendered
  type: list
  elements: dict
diff:
  description: With C(--diff), the ConfigMap's change (C(before), C(after)).
  returned: when the ConfigMap changes and diff mode is on
  type: list
  elements: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import Applier, listed
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_CONFIG_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import wait as mig_wait


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        state=dict(type="str", choices=["present", "checked", "rendered"], default="present"),
        document=dict(type="dict", required=True),
        config=dict(type="str", required=True),
        strategy=dict(type="str", choices=["single", "mixed"], default="single"),
        node_selector=dict(type="str", default="nvidia.com/gpu.present=true"),
        nodes=dict(type="list", elements="dict"),
        smi=dict(type="dict", default={}),
        configmap=dict(type="dict"),
        wait_timeout=dict(type="int", default=600),
        wait_interval=dict(type="float", default=5),
    )
    return spec


def judged(params, nodes):
    """``(errors, warnings)`` of the layout on ``nodes``: what stops the run, and what it only shows."""
    smi = params["smi"] or {}
    lgip, reports = smi.get("lgip") or {}, smi.get("reports") or {}
    document, config, strategy = params["document"], params["config"], params["strategy"]
    errors = mig_nodes.node_errors(document, config, nodes, strategy, lgip, reports)
    warnings = ["not checked before labelling: " + m for m in mig_nodes.node_unchecked(nodes, lgip, reports)]
    warnings += mig_nodes.node_warnings(document, config, nodes, strategy, lgip, reports)
    return errors, warnings


class MigLayout(object):
    """One run against a cluster: ``client`` kubernetes.core's, ``applier`` what writes its objects."""

    def __init__(self, module, client, waiter=None):
        self.module, self.client = module, client
        self.applier = Applier(module, client)
        self.waiter = waiter or Waiter()

    def nodes(self):
        return listed(self.client, "Node", label_selector=self.module.params["node_selector"])

    def namespace(self, name):
        """Create the namespace when it is missing; returns whether it is new. One that exists is left as it is."""
        definition = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if self.applier.live(definition):
            return False
        self.applier.service.create(self.applier.resource(definition), definition)
        self.applier.changed.append("Namespace/" + name)
        return True

    def label(self, node):
        """Select the config on ``node`` (label ``nvidia.com/mig.config``) when it selects another."""
        name, config = node["metadata"]["name"], self.module.params["config"]
        if ((node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)) == config:
            return
        self.applier.service.patch_resource(self.client.resource("Node", "v1"),
                                            {"metadata": {"labels": {MIG_CONFIG_LABEL: config}}}, name, None, "merge")
        self.applier.changed.append("Node/" + name)

    def wait(self, before):
        """Wait until the MIG manager has answered on every node; fail naming those it did not finish."""
        params, smi = self.module.params, self.module.params["smi"] or {}

        def progress(nodes):
            return mig_wait.progress(nodes, params["document"], params["config"], params["strategy"], before,
                                     smi.get("reports"), smi.get("lgip"))

        held, nodes, elapsed = self.waiter.wait(self.nodes, params["wait_timeout"], params["wait_interval"],
                                                lambda found: progress(found)["done"])
        result = progress(nodes)
        if not held:
            self.module.fail_json(
                msg="the MIG manager did not finish %r within %d s on %d node(s) (mig_config_wait_timeout):\n%s"
                    % (params["config"], params["wait_timeout"], len(result["waiting"]), "\n".join(result["waiting"])),
                progress=result, changed=bool(self.applier.changed))
        if result["failed"]:
            self.module.fail_json(msg="\n".join(result["failed"]), progress=result,
                                  changed=bool(self.applier.changed))
        return nodes, result, elapsed


def configmap(module):
    """The MIG manager's ConfigMap of the module's document; fails the module without O(configmap)."""
    target = module.params["configmap"] or {}
    if not target.get("name") or not target.get("namespace"):
        module.fail_json(msg="configmap: {name, namespace} of the MIG manager's ConfigMap is required with state %s"
                         % module.params["state"])
    return mig_nodes.configmap(module.params["document"], target["name"], target["namespace"])


def converge(module, client, waiter=None):
    """State present: check, write the ConfigMap, label, wait. Returns the module's result."""
    run = MigLayout(module, client, waiter)
    params = module.params
    desired = configmap(module)
    before = run.nodes()
    errors, warnings = judged(params, before)
    if errors:
        module.fail_json(msg="\n".join(errors), nodes_before=before)
    for warning in warnings:
        module.warn(warning)
    namespace = desired["metadata"]["namespace"]
    run.applier.apply(desired, [namespace] if run.namespace(namespace) else [])
    for node in before:
        run.label(node)
    nodes, progress, elapsed = before, {}, 0.0
    if not module.check_mode:
        nodes, progress, elapsed = run.wait(before)
    result = dict(changed=bool(run.applier.changed), nodes=nodes, nodes_before=before, progress=progress,
                  warnings=warnings, changed_objects=run.applier.changed, elapsed=round(elapsed, 1))
    if module._diff and run.applier.diffs:
        result["diff"] = run.applier.diffs
    return result


def checked(module, client_factory):
    """State checked: the layout against the given nodes or the cluster's, changing nothing."""
    params = module.params
    nodes = params["nodes"]
    if nodes is None:
        nodes = MigLayout(module, client_factory()).nodes()
    errors, warnings = judged(params, nodes)
    if errors:
        module.fail_json(msg="\n".join(errors), nodes_before=nodes)
    return dict(changed=False, nodes=nodes, nodes_before=nodes, progress={}, warnings=warnings, changed_objects=[],
                elapsed=0.0)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        if module.params["state"] == "rendered":
            result = dict(changed=False, objects=[configmap(module)], nodes=[], nodes_before=[], progress={},
                          warnings=[], changed_objects=[], elapsed=0.0)
        elif module.params["state"] == "checked":
            result = checked(module, lambda: get_api_client(module))
        else:
            result = converge(module, get_api_client(module))
        module.exit_json(**result)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
