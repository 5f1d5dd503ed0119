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
  - With O(drain) (the default) the nodes whose label must change are relabelled one batch at a time
    (O(drain_batch_size) nodes, in name order), so that tenants' work on the GPUs moves off first and the work on
    the other nodes keeps running. For each batch it cordons every node that is not already unschedulable
    (annotation C(fairgpu.io/mig-drain-cordoned) records that fairgpu did), evicts through the Eviction API each
    pod that holds accelerator devices there (not DaemonSet pods, not finished ones; the API server gives each a
    C(DisruptionTarget) condition, fairgpu writes an Event of reason C(FairgpuMigDrain)), retrying evictions a
    PodDisruptionBudget refuses, waits until no such pod is left (O(drain_timeout), then fails naming each pod and
    uncordons), labels the batch, waits for the MIG manager on it, and uncordons the nodes it cordoned. A node
    another party cordoned stays cordoned. When the MIG manager fails on a node, the batch is uncordoned (the node
    keeps its previous layout) and the run fails. A node left cordoned by an interrupted run is uncordoned once its
    label names O(config) and the MIG manager reported success; otherwise it is drained again.
    plugins/module_utils/mig/drain.py gives the rules and their sources.
  - Check mode is a server-side dry run of the ConfigMap and of each label (kubernetes.core's client), with no wait;
    it cordons and evicts nothing, and lists in RV(drain) and in the task's warnings the nodes it would drain and
    the pods it would evict from each. With C(--diff), RV(diff) holds the ConfigMap's change.
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
    description: Seconds to wait for the MIG manager on every node (with O(drain), on each batch's nodes).
    type: int
    default: 600
  drain:
    description:
      - Cordon and drain the nodes batch by batch before their label changes (see the description). C(false)
        relabels every node at once with no cordon and no eviction, for nodes nobody runs work on.
    type: bool
    default: true
  drain_batch_size:
    description: Nodes drained and relabelled together, at least 1.
    type: int
    default: 1
  drain_timeout:
    description:
      - Seconds to wait, per batch, until no pod holds devices on its nodes (evictions refused by a
        PodDisruptionBudget are retried meanwhile).
    type: int
    default: 600
  wait_interval:
    description: Seconds between two reads of the nodes.
    type: float
    default: 5
notes:
  - The MIG manager must be running before the labels change (it acts on a change of the label); on the embedded
    cluster the C(lab_mig_manager) role runs its simulation first.
  - An evicted Job pod counts as a failure against the Job's C(backoffLimit) unless its C(podFailurePolicy) ignores
    the C(DisruptionTarget) condition; docs/mig.md says what tenants should set.
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
drain:
  description:
    - The nodes the run drains (would drain, in check mode), in order, each with the pods (C(namespace/name)) that
      held devices on it when the run started. Empty with O(drain=false).
  returned: always
  type: list
  elements: dict
  sample: [{node: gpu-node-0, pods: [team-a/train-7x2kq]}, {node: gpu-node-1, pods: []}]
drained:
  description:
    - What the run drained, in order - per node, C(node), C(pods) (the pods it evicted, C(namespace/name)) and
      C(seconds) (the batch's wait until its nodes held no devices). Empty in check mode.
  returned: always
  type: list
  elements: dict
  sample: [{node: gpu-node-0, pods: [team-a/train-7x2kq], seconds: 3.0}]
changed_objects:
  description: The objects the run changed (would change, in check mode), as C(Kind/namespace/name).
  returned: always
  type: list
  elements: str
  sample: [ConfigMap/gpu-operator/fairgpu-mig-parted-config, Node/gpu-node-0]
elapsed:
  description: Seconds the waits for the MIG manager took (0 when there was none).
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
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import Applier, api_message, listed
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MIG_CONFIG_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.attribution import HOLDING_SELECTOR
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import drain as mig_drain
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import nodes as mig_nodes
from ansible_collections.fairgpu.tenancy.plugins.module_utils.mig import wait as mig_wait

try:
    from kubernetes.dynamic.exceptions import NotFoundError, TooManyRequestsError
except ImportError:
    # AnsibleK8SModule reports the missing library.
    NotFoundError = TooManyRequestsError = Exception


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
        drain=dict(type="bool", default=True),
        drain_batch_size=dict(type="int", default=1),
        drain_timeout=dict(type="int", default=600),
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
        self.patch_node(name, {"metadata": {"labels": {MIG_CONFIG_LABEL: config}}})

    def patch_node(self, name, patch):
        """Merge-patch the Node ``name`` (a server-side dry run in check mode) and record it."""
        self.applier.service.patch_resource(self.client.resource("Node", "v1"), patch, name, None, "merge")
        if "Node/" + name not in self.applier.changed:
            self.applier.changed.append("Node/" + name)

    def wait(self, before, names=None):
        """Wait until the MIG manager has answered on every node, or on the nodes ``names``. Returns ``(held, nodes,
        progress, elapsed)``: whether none is left waiting, the nodes last read, ``mig_wait.progress`` of them and
        the seconds it took."""
        params, smi = self.module.params, self.module.params["smi"] or {}

        def progress(nodes):
            return mig_wait.progress(nodes, params["document"], params["config"], params["strategy"], before,
                                     smi.get("reports"), smi.get("lgip"))

        def read():
            return [n for n in self.nodes() if names is None or n["metadata"]["name"] in names]

        held, nodes, elapsed = self.waiter.wait(read, params["wait_timeout"], params["wait_interval"],
                                                lambda found: progress(found)["done"])
        return held, nodes, progress(nodes), elapsed

    def fail_wait(self, held, result, note="", **extra):
        """Fail naming the nodes the MIG manager did not finish or failed on, when there are; ``note`` ends the
        message."""
        params = self.module.params
        if not held:
            self.module.fail_json(
                msg="the MIG manager did not finish %r within %d s on %d node(s) (mig_config_wait_timeout):\n%s%s"
                    % (params["config"], params["wait_timeout"], len(result["waiting"]), "\n".join(result["waiting"]),
                       note),
                progress=result, changed=bool(self.applier.changed), **extra)
        if result["failed"]:
            self.module.fail_json(msg="\n".join(result["failed"]) + note, progress=result,
                                  changed=bool(self.applier.changed), **extra)

    # --- the drain (plugins/module_utils/mig/drain.py) -------------------------------------------------------

    def pods(self):
        """The pods bound to a node and not finished, cluster-wide (``attribution.HOLDING_SELECTOR``)."""
        return listed(self.client, "Pod", field_selector=HOLDING_SELECTOR)

    def cordon(self, node):
        """Cordon ``node`` for the drain unless another party did; returns whether fairgpu holds the cordon (it did
        now, or an earlier run did: the annotation)."""
        if mig_drain.cordoned_by_fairgpu(node):
            return True
        if mig_drain.unschedulable(node):
            return False
        self.patch_node(node["metadata"]["name"], mig_drain.cordon_patch(self.module.params["config"]))
        return True

    def uncordon(self, names):
        for name in names:
            self.patch_node(name, mig_drain.uncordon_patch())

    def evict(self, pod):
        """Ask the Eviction API to evict ``pod``; returns None when it did (or the pod is gone), else the API server's
        refusal (429: a PodDisruptionBudget forbids it now; retried by the caller)."""
        evictions = self.client.resource("Pod", "v1").subresources["eviction"]
        try:
            self.client.create(evictions, mig_drain.eviction(pod), namespace=pod["metadata"]["namespace"])
        except (NotFoundError, TooManyRequestsError) as exc:
            if getattr(exc, "status", None) != 429:
                return None
            return api_message(exc) or str(exc)
        return None

    def record(self, pod, node):
        """The Event that says fairgpu evicted ``pod`` from ``node``, in the pod's namespace."""
        event = mig_drain.event(pod, node, self.module.params["config"], self.waiter.wall())
        self.client.create(self.client.resource("Event", "v1"), event, namespace=pod["metadata"]["namespace"])

    def drain(self, names):
        """Evict the device-holding pods from the (cordoned) nodes ``names`` until none is left, retrying refused
        evictions. Returns ``(held, pods left, {node: [evicted pod keys]}, refusals, seconds)``."""
        evicted, refused, uids = dict((name, []) for name in names), {}, set()

        def read():
            pods = mig_drain.holders(self.pods(), names)
            for pod in mig_drain.evictable(pods):
                key, uid = mig_drain.pod_key(pod), pod["metadata"].get("uid") or mig_drain.pod_key(pod)
                if uid in uids:
                    continue
                refusal = self.evict(pod)
                if refusal:
                    refused[key] = refusal
                    continue
                refused.pop(key, None)
                uids.add(uid)
                evicted[pod["spec"]["nodeName"]].append(key)
                self.record(pod, pod["spec"]["nodeName"])
            return pods

        params = self.module.params
        held, pods, elapsed = self.waiter.wait(read, params["drain_timeout"], params["wait_interval"],
                                               lambda found: not found)
        return held, pods or [], evicted, refused, elapsed

    def repair(self, nodes):
        """Uncordon the nodes an interrupted earlier run left cordoned after their MIG manager's success."""
        names = mig_drain.repairs(nodes, self.module.params["config"])
        self.uncordon(names)
        return names

    def batches(self, before):
        """Drain, relabel, wait and uncordon the nodes to change, one batch at a time. Returns ``(progress,
        drained, elapsed)``; fails the module (after uncordoning the batch) when a drain or the MIG manager fails."""
        params = self.module.params
        config = params["config"]
        progress, drained, elapsed = {"ready": [], "failed": [], "waiting": [], "done": True}, [], 0.0
        changing = set(mig_drain.to_change(before, config))
        progress["ready"] = sorted(n["metadata"]["name"] for n in before if n["metadata"]["name"] not in changing)
        for batch in mig_drain.batches(before, config, params["drain_batch_size"]):
            current = dict((n["metadata"]["name"], n) for n in self.nodes())
            ours = [name for name in batch if self.cordon(current[name])]
            held, pods, evicted, refused, seconds = self.drain(batch)
            drained += [{"node": name, "pods": evicted[name], "seconds": round(seconds, 1)} for name in batch]
            if not held:
                self.uncordon(ours)
                self.module.fail_json(
                    msg=mig_drain.timeout_message(pods, batch, config, params["drain_timeout"], refused)
                    + "\nThe node(s) keep their layout and were uncordoned%s."
                    % ("" if ours == batch else " (except those another party cordoned)"),
                    changed=bool(self.applier.changed), drained=drained, progress=progress)
            for name in batch:
                self.label(current[name])
            held, _nodes, result, seconds = self.wait(before, batch)
            elapsed += seconds
            result["ready"] = progress["ready"] = sorted(progress["ready"] + result["ready"])
            if result["failed"]:
                self.uncordon(ours)
                self.fail_wait(held, result, "\nThe batch's node(s) %s were uncordoned; a node the MIG manager "
                               "failed on keeps its previous layout." % ", ".join(ours) if ours else "",
                               drained=drained)
            self.fail_wait(held, result, "\nThe node(s) stay cordoned (annotation %s): a later run uncordons each "
                           "once its MIG manager reports success." % mig_drain.MIG_DRAIN_ANNOTATION
                           if ours else "", drained=drained)
            self.uncordon(ours)
        return progress, drained, elapsed


def configmap(module):
    """The MIG manager's ConfigMap of the module's document; fails the module without O(configmap)."""
    target = module.params["configmap"] or {}
    if not target.get("name") or not target.get("namespace"):
        module.fail_json(msg="configmap: {name, namespace} of the MIG manager's ConfigMap is required with state %s"
                         % module.params["state"])
    return mig_nodes.configmap(module.params["document"], target["name"], target["namespace"])


def converge(module, client, waiter=None):
    """State present: check, write the ConfigMap, then either drain, label and wait batch by batch (O(drain)) or
    label every node and wait. Returns the module's result."""
    run = MigLayout(module, client, waiter)
    params = module.params
    if params["drain_batch_size"] < 1:
        module.fail_json(msg="drain_batch_size must be at least 1, not %d (mig_config_drain_batch_size)"
                         % params["drain_batch_size"])
    desired = configmap(module)
    before = run.nodes()
    errors, warnings = judged(params, before)
    if errors:
        module.fail_json(msg="\n".join(errors), nodes_before=before)
    for warning in warnings:
        module.warn(warning)
    namespace = desired["metadata"]["namespace"]
    run.applier.apply(desired, [namespace] if run.namespace(namespace) else [])
    plan = mig_drain.plan(before, run.pods(), params["config"]) if params["drain"] else []
    nodes, progress, drained, elapsed = before, {}, [], 0.0
    if module.check_mode:
        for node in before:
            run.label(node)
        for line in mig_drain.plan_lines(plan):
            module.warn(line)
            warnings.append(line)
    elif params["drain"]:
        run.repair(before)
        progress, drained, elapsed = run.batches(before)
        nodes = run.nodes()
    else:
        for node in before:
            run.label(node)
        held, nodes, progress, elapsed = run.wait(before)
        run.fail_wait(held, progress)
    result = dict(changed=bool(run.applier.changed), nodes=nodes, nodes_before=before, progress=progress,
                  warnings=warnings, changed_objects=run.applier.changed, elapsed=round(elapsed, 1), drain=plan,
                  drained=drained)
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
                elapsed=0.0, drain=[], drained=[])


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        if module.params["state"] == "rendered":
            result = dict(changed=False, objects=[configmap(module)], nodes=[], nodes_before=[], progress={},
                          warnings=[], changed_objects=[], elapsed=0.0, drain=[], drained=[])
        elif module.params["state"] == "checked":
            result = checked(module, lambda: get_api_client(module))
        else:
            result = converge(module, get_api_client(module))
        module.exit_json(**result)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
