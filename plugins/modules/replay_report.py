#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replay_report
short_description: Write fairgpu's replay report (JSON, Markdown, plots of shares over time and of waits)
version_added: 0.2.0
description:
  - Judges a replay from the Workloads Kueue kept for its Jobs (C(plugins/module_utils/replay/report.py)) and writes
    C(replay.json), C(replay.md), C(shares.png) (GPUs held per tenant over time) and C(waits.png) (each tenant's
    waits, trace time) into O(path).
  - Does not talk to a cluster; the plot needs matplotlib (without it the report says so).
author:
  - fairgpu contributors (!UNKNOWN)
options:
  path:
    description: Directory to write into (created when missing).
    type: path
    required: true
  cluster:
    description: Name of the cluster (the inventory host).
    type: str
    required: true
  plan:
    description: The result of M(fairgpu.tenancy.replay_plan) with C(capacity) (the cluster's GPUs) added.
    type: dict
    required: true
  submitted:
    description: The result of M(fairgpu.tenancy.replay_submit).
    type: dict
    required: true
  workloads:
    description: The Workload objects of the tenants' namespaces, read after every Job finished.
    type: list
    elements: dict
    required: true
  tenants:
    description:
      - "Each tenant's quota as declared, C({tenant: {gpus, weight, borrowing_limit, lending_limit}}) (GPUs; a
        limit null: none; weight default 1): the guarantee the time-to-guarantee and the share reference judge
        against."
      - Declared in the inventory, not read from the cluster, so a ClusterQueue edited by hand is judged by what
        was promised.
      - "The replay's groups (filter C(fairgpu.tenancy.replay_tenant_queues)) also carry C(namespace), C(queue),
        C(cluster_queue) and C(admission_fair_sharing); groups that are namespaces of one ClusterQueue have C(gpus)
        0, and then no time-to-guarantee is judged."
    type: dict
    required: true
  events:
    description:
      - The events.k8s.io/v1 Events of the tenants' namespaces. Kueue's C(QuotaReserved) and C(Preempted) Events of
        a Workload give the holds its status no longer shows (a preempted Workload's earlier ones).
      - Without them each Workload holds from its last reservation only, and the report counts every evicted
        Workload's history as incomplete.
    type: list
    elements: dict
    default: []
  guarantee_bound:
    description:
      - Seconds (wall clock) a tenant may have a pending Workload that fits in its unused guarantee (nominalQuota)
        before Kueue reserves it, preempting borrowers if it must (the time-to-guarantee check).
    type: float
    default: 20
  fair_sharing:
    description:
      - Whether Kueue's Configuration has fairSharing (the kueue role's C(kueue_fair_sharing)). Without it Kueue
        lends first come, first served and promises the guarantee alone, so the share check fails only a tenant
        held below the guarantee part of its reference.
    type: bool
    default: true
  eviction_limit:
    description:
      - The most evictions of one Workload before the run counts as a preemption loop (kubernetes-sigs/kueue#3779,
        kubernetes-sigs/kueue#14543); a Workload evicted more often fails the check.
    type: int
    default: 10
  local_queues:
    description:
      - "The tenants' LocalQueues as read during and after the replay, C({read: [LocalQueue]}) (the replay role reads
        them after the last submission and after the last Workload finished). Their
        C(status.fairSharing.admissionFairSharingStatus.consumedResources) is admission fair sharing's usage per
        group, and with the Workloads' first reservations it gives the report's section on admission order; with
        admission fair sharing on for a group's ClusterQueue the check that Kueue recorded its usage is added
        (a half-life of 0 leaves it 0, kubernetes-sigs/kueue#11134)."
      - Omitted or null, the report has no such section.
    type: dict
  kueue_metrics:
    description:
      - "What Kueue's own metrics said, C({name: <Prometheus instant vector>}) (the C(data.result) of
        C(/api/v1/query) per query), reported per tenant (the sample's C(cluster_queue) or
        C(preempting_cluster_queue) label) beside the figures from the Workloads; not judged."
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Write the replay report
  fairgpu.tenancy.replay_report:
    path: results/embedded/replay
    cluster: embedded
    plan: "{{ replay_planned | combine({'capacity': 16}) }}"
    submitted: "{{ replay_submitted }}"
    workloads: "{{ replay_workloads }}"
    tenants: {tenant-0: {weight: 1, gpus: 4}}
"""

RETURN = r"""
passed:
  description:
    - Whether every check passed (no Job lost, every Workload admitted, shares within the bound, every tenant's
      time-to-guarantee within O(guarantee_bound) where a group has a guarantee, no eviction loop, and with
      admission fair sharing each group's usage recorded by Kueue).
  returned: always
  type: bool
checks:
  description: The checks, each C({name, passed, detail}).
  returned: always
  type: list
  elements: dict
failed_checks:
  description: Names and details of the failed checks.
  returned: always
  type: list
  elements: str
report:
  description: The whole report as written to C(replay.json).
  returned: always
  type: dict
markdown:
  description: Path of C(replay.md).
  returned: always
  type: str
plot:
  description: Path of C(shares.png), or null without matplotlib.
  returned: always
  type: str
waits_plot:
  description: Path of C(waits.png) (the distribution of each tenant's waits in trace time), or null without matplotlib.
  returned: always
  type: str
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.figure import write_png
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.report import (
    held_series, replay_document, replay_markdown)


def plot(path, title, series, reference, guarantees, capacity, factor):
    """A PNG of GPUs held per tenant over trace time (hours: wall seconds x ``factor``), with its fair reference
    (dotted, ``held_series`` of the reference timeline) and its guarantee (dashed) in the same colour; False when
    matplotlib is missing."""
    def draw(ax):
        for index, (name, (xs, ys)) in enumerate(sorted(series.items())):
            colour = "C%d" % index
            ax.step([x * factor / 3600.0 for x in xs], ys, where="post", color=colour, label="%s held" % name)
            if name in reference:
                rx, ry = reference[name]
                ax.step([x * factor / 3600.0 for x in rx], ry, where="post", color=colour, linestyle=":",
                        linewidth=1, label="%s fair reference" % name)
            if guarantees.get(name):
                ax.axhline(guarantees[name], color=colour, linestyle="--", linewidth=0.8,
                           label="%s guarantee %g" % (name, guarantees[name]))
        ax.axhline(capacity, color="black", linestyle="--", linewidth=1, label="capacity")
        ax.set_xlabel("trace hours from the first Workload")
        ax.set_ylabel("GPUs reserved by Kueue")
        ax.set_title(title, fontsize=10)
    return write_png(path, draw)


def plot_waits(path, title, waits):
    """A PNG of each tenant's waits (trace minutes) as a distribution: the share of its Workloads admitted within
    each wait; False when matplotlib is missing."""
    def draw(ax):
        for index, (name, values) in enumerate(sorted(waits.items())):
            ordered = sorted(v / 60.0 for v in values)
            if ordered:
                ax.step(ordered, [(i + 1) / float(len(ordered)) for i in range(len(ordered))], where="post",
                        color="C%d" % index, label="%s (%d Workloads)" % (name, len(ordered)))
        ax.set_xlabel("wait from creation to admission, trace minutes")
        ax.set_ylabel("share of the tenant's Workloads")
        ax.set_title(title, fontsize=10)
    return write_png(path, draw)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            cluster=dict(type="str", required=True),
            plan=dict(type="dict", required=True),
            submitted=dict(type="dict", required=True),
            workloads=dict(type="list", elements="dict", required=True),
            tenants=dict(type="dict", required=True),
            events=dict(type="list", elements="dict", default=[]),
            guarantee_bound=dict(type="float", default=20.0),
            kueue_metrics=dict(type="dict", default={}),
            eviction_limit=dict(type="int", default=10),
            fair_sharing=dict(type="bool", default=True),
            local_queues=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = replay_document(params["cluster"], params["plan"], params["submitted"], params["workloads"],
                          params["tenants"], now, events=params["events"], guarantee_bound=params["guarantee_bound"],
                          kueue_metrics=params["kueue_metrics"], eviction_limit=params["eviction_limit"],
                          fair_sharing=params["fair_sharing"], local_queues=params["local_queues"])
    paths = dict((k, os.path.join(params["path"], name)) for k, name in
                 (("json", "replay.json"), ("markdown", "replay.md"), ("plot", "shares.png"), ("waits", "waits.png")))
    plotted = waits_plotted = False
    if not module.check_mode:
        os.makedirs(params["path"], exist_ok=True)
        factor = doc["compression"]["factor"]
        plotted = plot(paths["plot"], "Replay on %s (%s): GPUs held per tenant, trace time" % (
            params["cluster"], doc["policy"]), held_series(doc["timeline"]), held_series(doc["reference_timeline"]),
            dict((t, (v or {}).get("gpus")) for t, v in params["tenants"].items()), doc["capacity"], factor)
        waits_plotted = plot_waits(paths["waits"], "Replay on %s (%s): waits per tenant, trace time" % (
            params["cluster"], doc["policy"]), doc["wait_samples"])
        page = replay_markdown(doc)
        page += ("\n![GPUs held per tenant](shares.png)\n" if plotted else "\nNo plot: matplotlib is missing.\n")
        page += "\n![Waits per tenant](waits.png)\n" if waits_plotted else ""
        with open(paths["json"], "w") as handle:
            json.dump(doc, handle, indent=2, sort_keys=True)
        with open(paths["markdown"], "w") as handle:
            handle.write(page)
    module.exit_json(changed=not module.check_mode, passed=doc["passed"], checks=doc["checks"],
                     failed_checks=["%s: %s" % (c["name"], c["detail"]) for c in doc["checks"] if not c["passed"]],
                     report=doc, markdown=paths["markdown"], plot=paths["plot"] if plotted else None,
                     waits_plot=paths["waits"] if waits_plotted else None)


if __name__ == "__main__":
    main()
