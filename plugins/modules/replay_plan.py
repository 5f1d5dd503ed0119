#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replay_plan
short_description: Turn a GPU cluster trace into the Jobs of a replay
version_added: 0.2.0
description:
  - Reads the Alibaba GPU cluster trace v2023 pod list (C(openb_pod_list_default.csv)) and decides, counting each
    decision, what the replay submits (C(plugins/module_utils/replay/trace.py)), then assigns tenants, picks the
    time window, scales GPUs to a load factor of the cluster's capacity and compresses time
    (C(plugins/module_utils/replay/schedule.py)).
  - Does not talk to a cluster and never changes anything.
author:
  - fairgpu contributors (!UNKNOWN)
options:
  path:
    description: The trace's pod list CSV.
    type: path
    required: true
  queues:
    description: "The LocalQueue of each tenant, C({tenant: {namespace, queue}})."
    type: dict
    required: true
  capacity:
    description: GPUs of the replay cluster.
    type: int
    required: true
  largest:
    description: The most GPUs one task may ask for (one node's GPUs); scaled tasks are capped there.
    type: int
    required: true
  tenants:
    description: Assign tenants by a stable hash of the task name into this many (C(tenant-0) ...); 0 with O(tenant_column).
    type: int
    default: 0
  tenant_column:
    description: Assign tenants by this column of the trace (for example C(qos)), lower-cased.
    type: str
  window_start:
    description: The window's start in trace seconds; omitted, the busiest window of O(window_seconds).
    type: int
  window_seconds:
    description: The window's length in trace seconds.
    type: int
    required: true
  max_tasks:
    description: Keep only the window's first N tasks (0 keeps all).
    type: int
    default: 0
  compression:
    description: Trace seconds per wall-clock second.
    type: float
    required: true
  floor:
    description: The shortest compressed run time, in wall seconds (at least twice the embedded cluster's pod start delay).
    type: int
    required: true
  load_factor:
    description: The window's mean GPU demand as a multiple of O(capacity) after scaling.
    type: float
    required: true
  prefix:
    description: Prefix of the Jobs' names.
    type: str
    default: replay
  node_list:
    description:
      - The trace's node list CSV (C(openb_node_list_gpu_node.csv) of the same release), for how loaded the trace's
        own cluster was in the window and how long its tasks waited there (RV(trace_cluster)); omitted, not reported.
    type: path
    version_added: 0.2.0
"""

EXAMPLES = r"""
- name: Plan a replay of the busiest day on 16 GPUs at 1.5 times the capacity
  fairgpu.tenancy.replay_plan:
    path: /data/alibaba-gpu-v2023/openb_pod_list_default.csv
    queues: {tenant-0: {namespace: tenant-0, queue: tenant-0-queue}}
    capacity: 16
    largest: 8
    tenants: 1
    window_seconds: 86400
    compression: 60
    floor: 30
    load_factor: 1.5
  register: replay
"""

RETURN = r"""
jobs:
  description: The Jobs to submit in order, each C({name, namespace, queue, tenant, gpus, seconds, at, trace_name}).
  returned: always
  type: list
  elements: dict
adapter:
  description: The trace adapter's counts (rows, no_gpu, never_scheduled, failed_kept, fractional_rounded_up, cut_at_end, gpu_spec_empty, tasks, trace_end).
  returned: always
  type: dict
assignment:
  description: How tenants were assigned (C(by)), tasks per tenant in the whole trace and, in C(replayed), Jobs, GPU-seconds and largest task per tenant.
  returned: always
  type: dict
window:
  description: The window (start, seconds, chosen, tasks, cut_to_max_tasks, busiest_mean_gpus, wall_seconds).
  returned: always
  type: dict
compression:
  description: The compression (factor, floor, raised_to_floor).
  returned: always
  type: dict
scaling:
  description: The scaling to the load factor (factor, trace and scaled mean demand, achieved load, capped, peak_demand).
  returned: always
  type: dict
trace_cluster:
  description:
    - The trace's own cluster in the window, with O(node_list); null without it.
    - C(nodes) and C(gpus) of the node list; C(mean_demand), the mean GPUs the trace's tasks held over the window
      (those submitted before it and still running included; a fractional request counted as a whole GPU, so at
      most what they held); C(load), C(mean_demand) / C(gpus), null without GPUs; C(waits), C(count), C(p50), C(p95)
      and C(max) of the waits, creation to scheduling in trace seconds, of the tasks created in the window, and
      C(never_scheduled), how many of them were never scheduled (no wait to rank).
    - A replay at a load factor far above C(load) measures the overload it was given, not the trace's cluster.
  returned: always
  type: dict
"""

import csv

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.schedule import ScheduleError, plan
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.trace import TraceError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            queues=dict(type="dict", required=True),
            capacity=dict(type="int", required=True),
            largest=dict(type="int", required=True),
            tenants=dict(type="int", default=0),
            tenant_column=dict(type="str"),
            window_start=dict(type="int"),
            window_seconds=dict(type="int", required=True),
            max_tasks=dict(type="int", default=0),
            compression=dict(type="float", required=True),
            floor=dict(type="int", required=True),
            load_factor=dict(type="float", required=True),
            prefix=dict(type="str", default="replay"),
            node_list=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        with open(params["path"]) as handle:
            rows = list(csv.DictReader(handle))
    except (IOError, OSError) as exc:
        module.fail_json(msg="replay_trace_dir: cannot read %s: %s" % (params["path"], exc))
    node_rows = None
    if params["node_list"]:
        try:
            with open(params["node_list"]) as handle:
                node_rows = list(csv.DictReader(handle))
        except (IOError, OSError) as exc:
            module.fail_json(msg="node_list: cannot read %s: %s" % (params["node_list"], exc))
    try:
        result = plan(rows, params["queues"], params["capacity"], params["largest"], params["window_seconds"],
                      params["compression"], params["floor"], params["load_factor"], tenants=params["tenants"],
                      tenant_column=params["tenant_column"], window_start=params["window_start"],
                      prefix=params["prefix"], max_tasks=params["max_tasks"], node_rows=node_rows)
    except (ScheduleError, TraceError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **dict((k, v) for k, v in result.items() if k not in ("capacity", "largest")))


if __name__ == "__main__":
    main()
