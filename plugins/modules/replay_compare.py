#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replay_compare
short_description: Put several replay reports side by side (policies compared, model next to measurement)
version_added: 0.2.0
description:
  - Reads the C(replay.json) of several replays (M(fairgpu.tenancy.replay_report)), for example the same replay under
    several Kueue policies, and writes one comparison (C(plugins/module_utils/replay/compare.py)) into O(path) as
    C(compare.json), C(compare.md) and C(waits.png) (wait p50 and p95 per tenant per policy, with the model's
    p95 where given, and the min..max of the runs' p95 where a policy has O(policies[].runs)).
  - Where a policy comes with the model's prediction (the C(prediction) it returns), each tenant's
    row shows it next to the measurement.
  - With O(targets) (the quota advisor's) each policy with a prediction is also checked
    (C(advice_checks) in C(plugins/module_utils/replay/compare.py)). The replay must meet every target, and the
    model's prediction of each targeted figure must be within O(error_bound) x the target of the measurement. A
    failed check names the tenant, the figure and which part of the model missed (evictions, GPU-hours reserved
    before the pods ran, or what it leaves out). The module reports them in RV(advice_failed) and the caller
    fails on them (C(playbooks/replay_advise.yml)).
  - Does not talk to a cluster; the plot needs matplotlib (without it the report says so).
author:
  - fairgpu contributors (!UNKNOWN)
options:
  path:
    description: Directory to write into (created when missing).
    type: path
    required: true
  title:
    description: Title of the Markdown page and the plot.
    type: str
    default: "fairgpu replay: policies compared"
  policies:
    description: The replays in order.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The policy's short name (a table column and the plot's legend).
        type: str
        required: true
      report:
        description: Path of the replay's C(replay.json).
        type: path
        required: true
      description:
        description: What the policy is, one line.
        type: str
        default: ""
      prediction:
        description: The model's prediction for the same Jobs under this policy (M(fairgpu.tenancy.replay_advise)'s the C(prediction) it returns).
        type: dict
      settings:
        description: The policy's settings (tenants, fair sharing), kept in C(compare.json).
        type: dict
      runs:
        description:
          - Paths of the C(replay.json) of every run of the policy (repeated replays on fresh clusters), O(policies[].report)
            among them. The comparison then gives min, median and max over the runs per tenant, and claims a
            difference in wait p95 between two policies only where their ranges do not overlap.
        type: list
        elements: path
  targets:
    description:
      - "The wait targets the quota advisor was given, C({tenant: {p95: 3600}}) in trace seconds (keys p50, p95,
        max). Each policy with a prediction is checked against them."
    type: dict
  same_jobs:
    description:
      - Whether the replays were made of the same Jobs (policies compared, the default). false for a load sweep
        (C(make replay-sweep)), whose loads scale and thin the same window's tasks; the comparison then asks only
        for the same window, and says so.
    type: bool
    default: true
    version_added: 0.2.0
  error_bound:
    description:
      - The largest prediction error allowed on a targeted figure, as a fraction of its target (0.5, the model
        may be off by half the target). Above it the check fails.
    type: float
    default: 0.5
"""

EXAMPLES = r"""
- name: Compare the replays of three policies
  fairgpu.tenancy.replay_compare:
    path: results/replay-compare
    policies:
      - {name: strict, report: results/replay-compare/strict/replay.json, description: no borrowing}
      - {name: borrowing, report: results/replay-compare/borrowing/replay.json}
      - {name: fair, report: results/replay-compare/fair/replay.json}
"""

RETURN = r"""
comparison:
  description:
    - "The comparison as written to C(compare.json): C(policies), each C({name, description, settings, passed,
      failed_checks, contended_seconds, idle_while_pending, most_evictions, jobs, lost, modelled, load,
      achieved_load, admission_order, tenants}) (C(load) the load asked of the replay and C(achieved_load) the one
      it had, multiples of the cluster's GPUs; C(admission_order) per run the pairs admitted out of creation order,
      C({on, pairs, overtaken, share, recorded}), empty without the report's section), where
      C(tenants) holds per tenant C({jobs, not_admitted, p50, p95, max, trace_gpu_hours, preempted, caused, held,
      reference, tolerance, share_within_tolerance, model}): waits in trace seconds, GPU-hours in trace hours,
      shares in GPUs (C(reference) Kueue's promise, guarantee first and then the unused quota by weight),
      C(model) the predicted C({p50, p95, max, not_admitted, preempted}) or absent."
    - Also C(generated), C(same_replay) (every report has the same window and Jobs, or with O(same_jobs) false the
      same window), C(same_jobs), C(trace_cluster) (the trace's own cluster in the window, of the first report that
      has it, or null), C(differences) and C(order_differences) (each pair of policies on wait p95 per tenant, and
      on the share admitted out of order; C(differs) only where the runs' ranges do not overlap), C(window),
      C(compression) and C(capacity) of the first report.
  returned: always
  type: dict
markdown:
  description: Path of C(compare.md).
  returned: always
  type: str
plot:
  description: Path of C(waits.png), or null without matplotlib.
  returned: always
  type: str
advice_failed:
  description: "With O(targets), each failed advice check as C(<policy>: failed \"<check>\": <detail>); empty otherwise."
  returned: always
  type: list
  elements: str
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.figure import write_png
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.compare import (
    compare_document, compare_markdown, wait_series)


def plot(path, title, tenants, series):
    """Grouped bars of the wait p95 (and p50 as a lighter bar) per tenant per policy, the model's p95 as a
    marker; False when matplotlib is missing."""
    def draw(ax):
        names = list(series)
        width = 0.8 / max(1, len(names))
        for index, name in enumerate(names):
            xs = [t + (index - (len(names) - 1) / 2.0) * width for t in range(len(tenants))]
            p95 = [v or 0 for v in series[name]["p95"]]
            p50 = [v or 0 for v in series[name]["p50"]]
            ax.bar(xs, p95, width * 0.9, color="C%d" % index, label="%s p95" % name)
            ax.bar(xs, p50, width * 0.9, color="white", alpha=0.45, hatch="//", edgecolor="C%d" % index)
            ranges = [(x, p, r) for x, p, r in zip(xs, p95, series[name].get("p95_range") or []) if r]
            if ranges:
                ax.errorbar([x for x, _p, _r in ranges], [p for _x, p, _r in ranges],
                            yerr=[[max(0.0, p - r[0]) for _x, p, r in ranges], [max(0.0, r[1] - p) for _x, p, r in ranges]],
                            fmt="none", ecolor="black", capsize=3, linewidth=1,
                            label="p95 min..max of the runs" if index == 0 else None)
            model = [(x, v) for x, v in zip(xs, series[name]["model_p95"]) if v is not None]
            if model:
                first = index == 0 or not any(series[n]["model_p95"] for n in names[:index])
                ax.plot([x for x, _v in model], [v for _x, v in model], "kx", markersize=8,
                        label="model p95" if first else None)
        ax.set_xticks(range(len(tenants)))
        ax.set_xticklabels(tenants)
        ax.set_ylabel("wait, trace hours (bar p95, hatched p50; medians of the runs)")
        ax.set_title(title, fontsize=10)
    return write_png(path, draw, grid_axis="y", legend_loc="upper right")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            title=dict(type="str", default="fairgpu replay: policies compared"),
            policies=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                report=dict(type="path", required=True),
                description=dict(type="str", default=""),
                prediction=dict(type="dict"),
                settings=dict(type="dict"),
                runs=dict(type="list", elements="path"),
            )),
            targets=dict(type="dict"),
            error_bound=dict(type="float", default=0.5),
            same_jobs=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    policies = []

    def read(policy, field, path):
        try:
            with open(path) as handle:
                return json.load(handle)
        except (IOError, OSError, ValueError) as exc:
            module.fail_json(msg="policies[%s].%s: cannot read %s: %s" % (policy["name"], field, path, exc))

    for policy in params["policies"]:
        runs = [read(policy, "runs", path) for path in policy["runs"] or []]
        policies.append(dict(policy, report=read(policy, "report", policy["report"]), runs=runs or None))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if params["error_bound"] <= 0:
        module.fail_json(msg="error_bound: a fraction of each target above 0, got %s" % params["error_bound"])
    doc = compare_document(policies, now, targets=params["targets"], error_bound=params["error_bound"],
                           same_jobs=params["same_jobs"])
    failed = ["%s: failed \"%s\": %s" % (p["name"], c["name"], c["detail"]) for p in doc["policies"]
              for c in (p.get("advice") or {}).get("checks", []) if not c["passed"]]
    paths = dict((k, os.path.join(params["path"], name)) for k, name in
                 (("json", "compare.json"), ("markdown", "compare.md"), ("plot", "waits.png")))
    plotted = False
    if not module.check_mode:
        os.makedirs(params["path"], exist_ok=True)
        tenants, series = wait_series(doc)
        plotted = plot(paths["plot"], params["title"], tenants, series)
        page = compare_markdown(doc, params["title"])
        page += ("\n![waits per tenant per policy](waits.png)\n" if plotted else "\nNo plot: matplotlib is missing.\n")
        with open(paths["json"], "w") as handle:
            json.dump(doc, handle, indent=2, sort_keys=True)
        with open(paths["markdown"], "w") as handle:
            handle.write(page)
    module.exit_json(changed=not module.check_mode, comparison=doc, markdown=paths["markdown"],
                     plot=paths["plot"] if plotted else None, advice_failed=failed)


if __name__ == "__main__":
    main()
