#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replay_advise
short_description: Predict a replay's waits with a model of Kueue, or search quotas that meet wait targets
version_added: 0.2.0
description:
  - Runs the Jobs of a planned replay (the result of M(fairgpu.tenancy.replay_plan)) through a discrete-event model
    of Kueue's admission (C(plugins/module_utils/replay/model.py)) on nominal quotas, borrowing limits, cohort
    borrowing, preemption to reclaim nominal quota and fair sharing.
  - O(mode=predict) predicts the per-tenant waits of one policy (O(policy)).
  - O(mode=search) is the quota advisor (C(plugins/module_utils/replay/advisor.py)) that searches guarantees,
    borrowing limits and weights meeting O(targets) with the smallest sum of guarantees, ranked by the model.
    Its recommendation is only a prediction until a replay through the real Kueue measures it
    (C(make replay-advise)).
  - Does not talk to a cluster. With O(path) it writes C(advice.json) and, for a search that found a
    recommendation, C(recommended.yml) (a vars file with C(tenants_list) for C(site.yml) and C(replay.yml)).
author:
  - fairgpu contributors (!UNKNOWN)
options:
  mode:
    description: C(predict) one policy, or C(search) for the quota advisor.
    type: str
    choices: [predict, search]
    default: search
  jobs:
    description:
      - The planned Jobs (the C(jobs) M(fairgpu.tenancy.replay_plan) returns), each with C(name), C(tenant), C(gpus),
        C(seconds) and C(at) (wall seconds).
    type: list
    elements: dict
    required: true
  capacity:
    description: The cluster's GPUs.
    type: int
    required: true
  compression:
    description: Trace seconds per wall second (the replay's compression); waits are reported in both.
    type: float
    required: true
  tenants:
    description: The tenants' names (O(mode=search)).
    type: list
    elements: str
  policy:
    description:
      - "O(mode=predict): per tenant C({gpus, borrowing_limit, lending_limit, weight}) (borrowing_limit and
        lending_limit null or left out: unlimited and all of gpus; weight default 1)."
    type: dict
  fair_sharing:
    description: Whether Kueue's Configuration has fairSharing (M(fairgpu.tenancy.replay_advise) models both).
    type: bool
    default: true
  targets:
    description: "O(mode=search): per tenant the most wait allowed in trace seconds, C({tenant: {p95: 3600}}) (keys p50, p95, max)."
    type: dict
  weights:
    description: O(mode=search) fair-sharing weights to try per tenant.
    type: list
    elements: float
    default: [1, 2]
  borrowing_limits:
    description: O(mode=search) borrowing limits to try per tenant, in GPUs; null is unlimited.
    type: list
    elements: raw
    default: [null]
  start_delay:
    description:
      - Wall seconds added to each Job's run time for its pod's start and stop (kwok's stages on the embedded
        cluster); 8 was fitted to the strict-quota replay of C(make replay-compare).
    type: float
    default: 8
  top:
    description: How many ranked candidates to return.
    type: int
    default: 5
  max_candidates:
    description: The most simulations of a search (the result says when it was cut).
    type: int
    default: 5000
  base_tenants:
    description: The inventory's C(tenants_list), whose other fields (max_jobs, namespaces) C(recommended.yml) keeps.
    type: list
    elements: dict
    default: []
  extra_vars:
    description: More variables for C(recommended.yml) (for example C(replay_results_dir)).
    type: dict
    default: {}
  path:
    description: Directory to write C(advice.json) (and C(recommended.yml)) into; none writes nothing.
    type: path
"""

EXAMPLES = r"""
- name: Search quotas meeting the wait targets
  fairgpu.tenancy.replay_advise:
    mode: search
    jobs: "{{ replay_planned.jobs }}"
    capacity: 16
    compression: 180
    tenants: [tenant-0, tenant-1, tenant-2]
    targets: {tenant-0: {p95: 28800}, tenant-1: {p95: 3600}, tenant-2: {p95: 10800}}
    path: results/replay-advise
  register: advice

- name: Predict the waits of one policy
  fairgpu.tenancy.replay_advise:
    mode: predict
    jobs: "{{ replay_planned.jobs }}"
    capacity: 16
    compression: 180
    fair_sharing: false
    policy: {tenant-0: {gpus: 6}, tenant-1: {gpus: 5}, tenant-2: {gpus: 5}}
"""

RETURN = r"""
prediction:
  description:
    - "Per tenant C({jobs, not_admitted, preempted, p50, p95, max, trace_p50, trace_p95, trace_max, gpu_hours,
      trace_gpu_hours}) under O(policy) (O(mode=predict)) or the recommendation (O(mode=search)); waits in wall
      seconds and, C(trace_), trace seconds; GPU-hours of the finished runs in wall and trace hours."
    - Also C(preemptions) (evictions in all) and C(end) (wall seconds when the last Job finished).
  returned: always
  type: dict
recommended:
  description:
    - "O(mode=search): C({tenants: {tenant: {gpus, borrowing_limit, weight}}, sum, margin, met}) where C(sum) is
      the sum of guarantees in GPUs and C(margin) the largest predicted wait / target; null when no candidate met
      the targets."
  returned: always
  type: dict
candidates:
  description: O(mode=search) the best-ranked candidates meeting the targets, as RV(recommended).
  returned: always
  type: list
  elements: dict
evaluated:
  description: Simulations run.
  returned: always
  type: int
sums_tried:
  description: "Per stage and sum of guarantees, C([sum, candidates simulated, candidates meeting the targets])."
  returned: always
  type: list
  elements: list
truncated:
  description: Whether the search stopped at O(max_candidates).
  returned: always
  type: bool
tenants_list:
  description: The recommendation as a C(tenants_list) for C(site.yml) (empty without one).
  returned: always
  type: list
  elements: dict
files:
  description: Paths written (C(advice.json), C(recommended.yml)).
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay import advisor, model


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["predict", "search"], default="search"),
            jobs=dict(type="list", elements="dict", required=True),
            capacity=dict(type="int", required=True),
            compression=dict(type="float", required=True),
            tenants=dict(type="list", elements="str"),
            policy=dict(type="dict"),
            fair_sharing=dict(type="bool", default=True),
            targets=dict(type="dict"),
            weights=dict(type="list", elements="float", default=[1, 2]),
            borrowing_limits=dict(type="list", elements="raw", default=[None]),
            start_delay=dict(type="float", default=8),
            top=dict(type="int", default=5),
            max_candidates=dict(type="int", default=5000),
            base_tenants=dict(type="list", elements="dict", default=[]),
            extra_vars=dict(type="dict", default={}),
            path=dict(type="path"),
        ),
        required_if=[("mode", "predict", ["policy"]), ("mode", "search", ["tenants", "targets"])],
        supports_check_mode=True,
    )
    p = module.params
    result = {"recommended": None, "candidates": [], "evaluated": 0, "sums_tried": [], "truncated": False,
              "tenants_list": [], "files": []}
    try:
        if p["mode"] == "predict":
            result["prediction"] = model.predict(p["jobs"], p["policy"], p["capacity"], p["compression"],
                                                 fair_sharing=p["fair_sharing"], start_delay=p["start_delay"])
            result["evaluated"] = 1
        else:
            limits = [None if b in (None, "", "null") else int(b) for b in p["borrowing_limits"]]
            found = advisor.advise(p["jobs"], p["tenants"], p["capacity"], p["targets"], p["compression"],
                                   weights=p["weights"], borrowing_limits=limits, fair_sharing=p["fair_sharing"],
                                   start_delay=p["start_delay"], top=p["top"], max_candidates=p["max_candidates"])
            result.update(found)
            result["prediction"] = (found["recommended"] or {}).get("prediction", {})
            if found["recommended"]:
                result["tenants_list"] = advisor.tenants_list(found["recommended"], p["base_tenants"])
    except (model.ModelError, advisor.AdvisorError) as exc:
        module.fail_json(msg=str(exc))
    if p["path"] and not module.check_mode:
        os.makedirs(p["path"], exist_ok=True)
        advice = os.path.join(p["path"], "advice.json")
        with open(advice, "w") as handle:
            json.dump(dict(result, mode=p["mode"], targets=p["targets"], policy=p["policy"],
                           fair_sharing=p["fair_sharing"], start_delay=p["start_delay"],
                           compression=p["compression"], capacity=p["capacity"]), handle, indent=2, sort_keys=True)
        result["files"].append(advice)
        if result["tenants_list"]:
            recommended = os.path.join(p["path"], "recommended.yml")
            with open(recommended, "w") as handle:
                handle.write("---\n# The quota advisor's recommendation (replay_advise), for site.yml and replay.yml.\n")
                handle.write(json.dumps(dict(p["extra_vars"], tenants_list=result["tenants_list"]), indent=2,
                                        sort_keys=True) + "\n")
            result["files"].append(recommended)
    module.exit_json(changed=bool(result["files"]), **result)


if __name__ == "__main__":
    main()
