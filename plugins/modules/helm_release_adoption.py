#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: helm_release_adoption
short_description: Decide what fairgpu does with a Helm release that is already there (adopt, don't overwrite)
version_added: 0.1.0
description:
  - Compares a release's values (C(status) of M(kubernetes.core.helm_info)) with the values fairgpu would give it,
    key by key, and decides (C(plugins/module_utils/plan/helm_release.py)) whether the role installs, upgrades,
    merges fairgpu's values over the release's (O(mode=merge)) or stops before anything changes (O(mode=refuse),
    the default for a release fairgpu did not install or one whose values someone changed by hand).
  - Fails on C(refuse), listing what an upgrade would change and drop, and the fix.
  - Returns the values to pass to M(kubernetes.core.helm); with C(--diff) shows the release's values now and those
    values. Reports C(changed) when the release's values would change; it changes nothing itself.
  - Does not talk to a cluster.
author:
  - fairgpu contributors (!UNKNOWN)
options:
  chart:
    description: Which chart, for its path rules (a YAML document in a string value, lists that are sets).
    type: str
    required: true
    choices: [kueue, gpu-operator, kube-prometheus-stack]
  role:
    description: The role's variable prefix, named in the message (C(<role>_adopt), C(<role>_extra_values)).
    type: str
    required: true
  status:
    description: C(status) of M(kubernetes.core.helm_info) for the release; empty when there is none.
    type: dict
    default: {}
  values:
    description: fairgpu's values for the chart (the role's values with C(<role>_extra_values)), without the marker.
    type: dict
    required: true
  mode:
    description: The role's C(<role>_adopt).
    type: str
    default: refuse
    choices: [refuse, merge]
  defaults:
    description: The chart's default values (C(helm show values)), as YAML text; empty when unknown.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Decide what to do with the release
  fairgpu.tenancy.helm_release_adoption:
    chart: kueue
    role: kueue
    status: "{{ kueue_release.status | default({}) }}"
    values: "{{ kueue_chart_values }}"
    mode: "{{ kueue_adopt }}"
    defaults: "{{ kueue_chart_defaults.stdout | default('') }}"
  register: kueue_adoption
"""

RETURN = r"""
decision:
  description: C(install), C(upgrade), C(merge) or C(refuse).
  returned: always
  type: str
helm_values:
  description: The values to pass to M(kubernetes.core.helm), fairgpu's marker included where the release is fairgpu's.
  returned: always
  type: dict
changes:
  description: The keys fairgpu sets whose value differs, each C({key, old, new, from}).
  returned: always
  type: list
  elements: dict
dropped:
  description: What an upgrade with reset values would drop, each C({key, value, default}).
  returned: always
  type: list
  elements: dict
kept:
  description: Under C(merge), the release's values a reset would have dropped and the merge keeps.
  returned: always
  type: list
  elements: dict
lines:
  description: The listing a person reads.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import helm_release


def main():
    module = AnsibleModule(
        argument_spec=dict(
            chart=dict(type="str", required=True, choices=["kueue", "gpu-operator", "kube-prometheus-stack"]),
            role=dict(type="str", required=True),
            status=dict(type="dict", default={}),
            values=dict(type="dict", required=True),
            mode=dict(type="str", default="refuse", choices=list(helm_release.MODES)),
            defaults=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = helm_release.adoption(params["status"], params["values"], params["mode"], params["chart"],
                                   params["role"], params["defaults"] or None)
    out = dict(decision=result["decision"], helm_values=result["values"], changes=result["changes"],
               dropped=result["dropped"], kept=result["kept"], lines=result["lines"], release=result["release"])
    if result["decision"] == "refuse":
        module.fail_json(msg=result["message"], **out)
    diff = dict(before=result["diff"]["before"], after=result["diff"]["after"],
                before_header="release values now", after_header="values fairgpu passes (%s)" % result["decision"])
    module.exit_json(changed=result["would_change"], diff=diff, **out)


if __name__ == "__main__":
    main()
