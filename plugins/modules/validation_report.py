#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: validation_report
short_description: Write fairgpu's validation report (JSON, Markdown and PNG plots)
version_added: 0.1.0
description:
  - Writes C(report.json), C(report.md) and one C(<scenario>.png) per scenario with a timeline (GPUs held per
    tenant over time, with each tenant's guarantee as a dashed line) into O(path).
  - Scenario results come from the C(validate) role (see C(plugins/module_utils/validation/scenarios.py)); this module
    only renders them. It does not talk to a cluster.
  - The PNG plots need matplotlib on the host that runs the module; without it the report says so and has no
    pictures.
author:
  - fairgpu maintainers (!UNKNOWN)
options:
  path:
    description: Directory to write into (created when missing).
    type: path
    required: true
  cluster:
    description: Name of the cluster (the inventory host), shown in the title.
    type: str
    required: true
  tenants:
    description: Normalised tenants (name, namespaces, gpu_resource, gpus, borrowing_limit, lending_limit, max_gpus, weight).
    type: list
    elements: dict
    required: true
  scenarios:
    description: Scenario results, each C({name, title, checks, metrics, timeline}).
    type: list
    elements: dict
    required: true
  warnings:
    description:
      - The tenant plan's warnings (such as guarantees above what the schedulable GPU nodes offer while nodes are
        cordoned or NotReady), shown in the report; they do not fail it.
    type: list
    elements: str
    default: []
  capacity:
    description:
      - The tenant plan's GPU capacity (C(tenants_plan.capacity), from C(cluster_capacity) in
        C(plugins/module_utils/tenants/plan.py)). The report shows one row per GPU product and accelerator resource
        with the installed, schedulable (cordoned and NotReady nodes left out) and guaranteed devices, the sharing,
        and the nodes not counted.
      - Omitted, the report has no capacity table.
    type: dict
"""

EXAMPLES = r"""
- name: Write the report
  fairgpu.tenancy.validation_report:
    path: results/embedded
    cluster: embedded
    tenants: "{{ plan.tenants }}"
    scenarios: "{{ validate_results }}"
"""

RETURN = r"""
passed:
  description: Whether every check of every scenario passed (false when there is no scenario).
  returned: always
  type: bool
failed_checks:
  description: "One line per failed check: C(<scenario>: <check> (expected X, observed Y))."
  returned: always
  type: list
  elements: str
json:
  description: Path of report.json.
  returned: always
  type: str
markdown:
  description: Path of report.md.
  returned: always
  type: str
images:
  description: Scenario name to the path of its PNG plot (empty without matplotlib).
  returned: always
  type: dict
summary:
  description: One line per scenario with its result (passed, FAILED, or measured nothing when it has no check), for the play's output.
  returned: always
  type: list
  elements: str
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.figure import write_png
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import (
    held_series,
    report_document,
    report_markdown,
)


def plot(path, title, series, guarantees):
    """Write a PNG of GPUs held per tenant; returns False when matplotlib is missing."""
    def draw(ax):
        for index, (name, points) in enumerate(sorted(series.items())):
            color = "C%d" % index
            # Wider lines first, so a tenant whose line coincides with another's stays visible under it.
            ax.step([p[0] for p in points], [p[1] for p in points], where="post", color=color,
                    label="%s held" % name, linewidth=max(3.5 - 1.5 * index, 1.0))
            if name in guarantees:
                ax.axhline(guarantees[name], color=color, linestyle="--", linewidth=1, label="%s guaranteed" % name)
        ax.set_xlabel("seconds")
        ax.set_ylabel("GPUs reserved by Kueue")
        ax.set_title(title, fontsize=10)
    return write_png(path, draw, legend_loc="upper right", figsize=(9, 4.5))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            cluster=dict(type="str", required=True),
            tenants=dict(type="list", elements="dict", required=True),
            scenarios=dict(type="list", elements="dict", required=True),
            warnings=dict(type="list", elements="str", default=[]),
            capacity=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = report_document(params["cluster"], params["tenants"], params["scenarios"], now, params["warnings"],
                               params["capacity"])
    paths = {"json": os.path.join(params["path"], "report.json"), "markdown": os.path.join(params["path"], "report.md")}
    images = {}
    summary = ["%s: %s (%d checks)" % (s["name"], "measured nothing" if not s["checks"] else "passed" if all(
        c["passed"] for c in s["checks"]) else "FAILED", len(s["checks"])) for s in params["scenarios"]]
    if not module.check_mode:
        os.makedirs(params["path"], exist_ok=True)
        guarantees = {t["name"]: t["gpus"] for t in params["tenants"]}
        for scenario in params["scenarios"]:
            series = held_series(scenario.get("timeline") or [])
            if not series:
                continue
            image = os.path.join(params["path"], "%s.png" % scenario["name"])
            if plot(image, scenario["title"], series, guarantees):
                images[scenario["name"]] = image
        with open(paths["json"], "w") as handle:
            json.dump(document, handle, indent=2, sort_keys=True)
        with open(paths["markdown"], "w") as handle:
            handle.write(report_markdown(document, {k: os.path.basename(v) for k, v in images.items()}))
    module.exit_json(changed=not module.check_mode, passed=document["passed"],
                     failed_checks=document["failed_checks"], images=images, summary=summary, **paths)


if __name__ == "__main__":
    main()
