#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: component_namespace
short_description: The namespace of a component fairgpu installs, with the Pod Security level its pods need
version_added: 0.1.0
description:
  - The namespace of the GPU Operator, Kueue or the monitoring, made ready before anything is installed into it, so
    that its pods are admitted where the API server enforces a stricter Pod Security level by default.
  - The level comes from the one table of levels (plugins/module_utils/cluster/pod_security.py C(policy), with the
    upstream source of each row); the decision from C(plan) - a namespace that is missing is created as fairgpu's
    (labels C(pod-security.kubernetes.io/enforce), C(audit), C(warn) and fairgpu's managed-by label), one that is
    fairgpu's is labelled again, and one that is not fairgpu's keeps its labels (the C(cluster) role's pre-check has
    already stopped the run where its level would refuse what runs there).
  - Server-side apply, field manager C(fairgpu); check mode is a server-side dry run.
author:
  - fairgpu maintainers (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  name:
    description: The namespace.
    type: str
    required: true
  component:
    description: What runs there.
    type: str
    required: true
    choices: [gpu_operator, kueue, monitoring]
  mode:
    description:
      - How it runs (the run's mode of the component, C(run_settings.modes)) - C(helm) for a chart's pods; another
        mode runs them on the controller (the lab's simulated GPU Operator, a local Kueue or Prometheus).
    type: str
    required: true
  install_chart:
    description: With O(component=monitoring), whether fairgpu installs kube-prometheus-stack there (monitoring_install_chart).
    type: bool
    default: true
  kueue_values:
    description:
      - With O(component=kueue), the chart values given beside fairgpu's (kueue_extra_values);
        C(controllerManager.hostNetwork) needs C(privileged).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Create or label Kueue's namespace with its Pod Security level
  fairgpu.tenancy.component_namespace:
    name: kueue-system
    component: kueue
    mode: helm
"""

RETURN = r"""
action:
  description: What fairgpu did with the namespace - C(create), C(label) (it is fairgpu's) or C(keep) (it is not).
  returned: always
  type: str
  sample: create
labels:
  description: The labels fairgpu applied (none with C(keep)).
  returned: always
  type: dict
  sample: {"pod-security.kubernetes.io/enforce": privileged, "app.kubernetes.io/managed-by": fairgpu}
line:
  description: One line for the play's output, the namespace and its level.
  returned: always
  type: str
diff:
  description: With C(--diff), the namespace's change.
  returned: when the namespace changes and diff mode is on
  type: list
  elements: dict
"""

import copy

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import pod_security
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.applier import Applier
from ansible_collections.fairgpu.tenancy.plugins.module_utils.teardown.plan import other_writers


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        name=dict(type="str", required=True),
        component=dict(type="str", required=True, choices=["gpu_operator", "kueue", "monitoring"]),
        mode=dict(type="str", required=True),
        install_chart=dict(type="bool", default=True),
        kueue_values=dict(type="dict", default={}),
    )
    return spec


def converge(module, client):
    params = module.params
    applier = Applier(module, client)
    definition = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": params["name"]}}
    live = applier.live(definition)
    row = dict(pod_security.policy(params["component"], params["mode"], params["install_chart"], params["kueue_values"]),
               namespace=params["name"])
    found = {params["name"]: {"object": live, "other_writers": other_writers(live)}} if live else {}
    planned = pod_security.plan([row], found)
    decided = planned["namespaces"][params["name"]]
    if decided["action"] != "keep":
        definition["metadata"]["labels"] = decided["labels"]
        applier.apply(definition)
    result = dict(changed=bool(applier.changed), action=decided["action"], labels=decided["labels"],
                  line=planned["lines"][0])
    if module._diff and applier.diffs:
        result["diff"] = applier.diffs
    return result


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        module.exit_json(**converge(module, get_api_client(module)))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
