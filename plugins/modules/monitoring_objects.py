#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: monitoring_objects
short_description: fairgpu's ServiceMonitors, PrometheusRules, Kueue metrics reader and dashboard for a Prometheus Operator
version_added: 0.1.0
description:
  - The desired state of fairgpu's monitoring objects on a cluster with the Prometheus Operator, in one module run -
    the Kueue metrics reader (ServiceAccount, ClusterRole, ClusterRoleBinding, token Secret), the ServiceMonitors of
    Kueue and of the GPU Operator's DCGM exporter, the PrometheusRules and the dashboard ConfigMap
    (plugins/module_utils/monitoring/objects.py C(helm_objects)).
  - Where they go depends on the Prometheus custom resources that would read them (their selectors,
    C(enforcedNamespaceLabel), C(excludedFromEnforcement), C(ignoreNamespaceSelectors)) and the namespaces' labels
    (plugins/module_utils/monitoring/placement.py C(plan), with the Prometheus Operator's source of each rule). The
    module reads them, decides, and stops with every error before anything changes.
  - With O(state=present) it then removes fairgpu's objects from where this placement does not put them (and the Kueue
    ServiceMonitor of earlier fairgpu versions in the monitoring namespace), compares each object with the live one in the
    fields fairgpu sets (RV(drift)), and applies each with server-side apply (field manager C(fairgpu),
    C(force_conflicts)). Check mode is a server-side dry run; an object in a namespace that is not there yet is
    listed in RV(changed_objects) as one the run would create. With C(--diff), RV(diff) holds one entry per object
    that would change.
  - With O(state=checked) it only reads and decides (RV(placement)); with O(state=rendered) it builds the objects with
    no cluster and no placement (RV(objects); C(render.yml)).
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  state:
    description: C(present) places and applies; C(checked) places only; C(rendered) builds the objects only.
    type: str
    choices: [present, checked, rendered]
    default: present
  tenants:
    description: The tenants, normalised as the monitoring role's C(monitoring_tenants) (C(name), C(namespaces), C(gpus)).
    type: list
    elements: dict
    default: []
  spec:
    description:
      - The objects described once, the monitoring role's C(monitoring_spec) - C(rules_text) (the rule file with the
        role's C(for:) overrides), C(dashboard) (JSON text), C(namespace), C(release), C(labels), C(interval) (a
        Prometheus duration), C(kueue) (C(namespace), C(service_labels), C(metrics_ca), C(server_name)) and C(dcgm)
        (C(namespace), C(service_labels)).
    type: dict
    required: true
  prometheus:
    description: The Prometheus (C(namespace/name)) whose selectors decide; empty, every Prometheus on the cluster counts.
    type: str
    default: ""
  cross_namespace_rules:
    description:
      - What to do with rules that read series of two namespaces when a Prometheus enforces a namespace label -
        C(refuse) stops the run, C(omit) leaves those rules out (monitoring_enforced_cross_namespace_rules).
    type: str
    choices: [refuse, omit]
    default: refuse
  install_chart:
    description:
      - Whether fairgpu installs kube-prometheus-stack, whose Prometheus selects every object; then a cluster with no
        Prometheus yet (check mode before the chart) places them with nothing to check. Without it, fairgpu creates
        the monitoring namespace as its own (module C(component_namespace)), and the placement sees it with
        fairgpu's managed-by label before it exists.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Place and apply fairgpu's monitoring objects
  fairgpu.tenancy.monitoring_objects:
    tenants: "{{ monitoring_tenants }}"
    spec: "{{ monitoring_spec }}"
    install_chart: false
  register: monitoring_objects
"""

RETURN = r"""
placement:
  description:
    - Where the objects go and why (placement.py C(plan)) - C(layout) (C(single) or C(split)), C(rules) and C(monitors)
      (namespace and name of each), C(selected_by) (C(Kind namespace/name) to the Prometheus objects that select
      it), C(enforcing) (the Prometheus objects that enforce a namespace label), C(omitted) (rule names left out),
      C(stale) (objects to remove) and C(errors). Absent with O(state=rendered).
  returned: unless state is rendered
  type: dict
objects:
  description: fairgpu's monitoring objects as applied (or rendered), API dicts in apply order.
  returned: always
  type: list
  elements: dict
drift:
  description: One line per field in which a live object differs from fairgpu's (C(Kind/namespace/name path - live X, fairgpu Y)).
  returned: always
  type: list
  elements: str
changed_objects:
  description: The objects the run changed or removed (would, in check mode), as C(Kind/namespace/name).
  returned: always
  type: list
  elements: str
diff:
  description: With C(--diff), one entry per object that changed (C(before), C(after), headers).
  returned: when an object changes and diff mode is on
  type: list
  elements: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import Applier, listed
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MANAGED_BY_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import objects as monitoring
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import placement as monitoring_placement

OPERATOR_API = "monitoring.coreos.com/v1"
# The Kueue ServiceMonitor of earlier fairgpu versions, in the monitoring namespace: it used bearerTokenFile, which
# hardened Prometheus set-ups refuse, and would scrape Kueue a second time.
LEGACY_KUEUE_MONITOR = "fairgpu-kueue"


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        state=dict(type="str", choices=["present", "checked", "rendered"], default="present"),
        tenants=dict(type="list", elements="dict", default=[]),
        spec=dict(type="dict", required=True),
        prometheus=dict(type="str", default=""),
        cross_namespace_rules=dict(type="str", choices=["refuse", "omit"], default="refuse"),
        install_chart=dict(type="bool", default=True),
    )
    return spec


def namespaces_of(spec):
    """The three namespaces fairgpu's objects go to: the monitoring namespace, Kueue's and the DCGM exporter's."""
    return [spec["namespace"], spec["kueue"]["namespace"], spec["dcgm"]["namespace"]]


def build(module, placement=None):
    """``monitoring.helm_objects`` of the module's ``tenants`` and ``spec``; fails the module on unusable input."""
    params = module.params
    spec, kueue, dcgm = params["spec"], params["spec"]["kueue"], params["spec"]["dcgm"]
    try:
        return monitoring.helm_objects(params["tenants"], spec["rules_text"], spec["dashboard"], spec["namespace"],
                                       spec["release"], kueue["namespace"], kueue["service_labels"], dcgm["namespace"],
                                       dcgm["service_labels"], spec["interval"], kueue.get("metrics_ca"),
                                       kueue.get("server_name") or "", placement=placement, labels=spec.get("labels"))
    except monitoring.MonitoringError as exc:
        module.fail_json(msg=str(exc))


def place(module, client):
    """Read the Prometheus objects and the namespaces, and decide. Returns ``(placement, namespaces not there)``;
    fails the module, changing nothing, on any error of the placement."""
    params, spec = module.params, module.params["spec"]
    prometheuses = listed(client, "Prometheus", OPERATOR_API)
    if params["install_chart"] and not prometheuses:
        prometheuses = None  # the chart's Prometheus selects every object (objects.chart_values): nothing to check
    names = sorted(set(namespaces_of(spec)))
    found = [n for n in listed(client, "Namespace") if n["metadata"]["name"] in names]
    missing = sorted(set(names) - set(n["metadata"]["name"] for n in found))
    created = {} if params["install_chart"] else {spec["namespace"]: {MANAGED_BY_LABEL: "fairgpu"}}
    try:
        placed = monitoring_placement.plan(
            prometheuses, monitoring_placement.namespace_labels(found, namespaces_of(spec), created),
            spec["namespace"], spec["kueue"]["namespace"], spec["dcgm"]["namespace"],
            monitoring.object_labels(spec["release"], spec.get("labels")), spec["rules_text"], params["prometheus"],
            params["cross_namespace_rules"])
    except monitoring_placement.PlacementError as exc:
        module.fail_json(msg=str(exc))
    if placed["errors"]:
        module.fail_json(msg=" | ".join(placed["errors"]), placement=placed)
    return placed, missing


def converge(module, client):
    """State present: place, remove what is misplaced, apply. Returns the module's result."""
    spec = module.params["spec"]
    placed, missing = place(module, client)
    applier = Applier(module, client)
    stale = [dict(item) for item in placed["stale"]]
    if spec["namespace"] != spec["kueue"]["namespace"]:
        stale.insert(0, {"kind": "ServiceMonitor", "namespace": spec["namespace"], "name": LEGACY_KUEUE_MONITOR})
    for item in stale:
        if item["namespace"] not in missing:
            applier.delete({"apiVersion": OPERATOR_API, "kind": item["kind"],
                            "metadata": {"name": item["name"], "namespace": item["namespace"]}})
    objects = build(module, placed)
    differences = []
    for definition in objects:
        differences.extend(applier.apply(definition, missing))
    result = dict(changed=bool(applier.changed), placement=placed, objects=objects,
                  drift=drift.difference_lines(differences), changed_objects=applier.changed)
    if module._diff and applier.diffs:
        result["diff"] = applier.diffs
    return result


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        state = module.params["state"]
        if state == "rendered":
            result = dict(changed=False, objects=build(module), drift=[], changed_objects=[])
        elif state == "checked":
            placed, _missing = place(module, get_api_client(module))
            result = dict(changed=False, placement=placed, objects=[], drift=[], changed_objects=[])
        else:
            result = converge(module, get_api_client(module))
        module.exit_json(**result)
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
