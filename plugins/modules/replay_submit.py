#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: replay_submit
short_description: Submit a replay's Jobs to their tenants' LocalQueues at their wall-clock times
version_added: 0.2.0
description:
  - Creates each Job of O(jobs) (from M(fairgpu.tenancy.replay_plan)) when its time C(at) (seconds from the start
    of this task) comes, suspended and labelled with its tenant's LocalQueue, so that Kueue decides when it runs.
  - On the embedded cluster (O(simulated)) the pod runs for the Job's C(seconds) through kwok's pod-complete
    delay annotations.
  - A Job of this O(run_id) that already exists is left alone, without waiting for its time, so a second run of
    the same replay changes nothing.
  - A Job created more than O(late_limit) seconds after its time fails the task, since the replay's timing would
    no longer be the trace's.
  - Which Jobs are due and the Job objects are pure logic in C(plugins/module_utils/replay/schedule.py).
author:
  - fairgpu contributors (!UNKNOWN)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  jobs:
    description: The Jobs, each C({name, namespace, queue, tenant, gpus, seconds, at, trace_name}), in C(at) order.
    type: list
    elements: dict
    required: true
  run_id:
    description: Value of the C(fairgpu.io/replay) label on every Job and pod of this replay.
    type: str
    required: true
  image:
    description: Image of the Jobs' container (it runs C(sleep <seconds>) on a real cluster).
    type: str
    default: busybox:1.37
  simulated:
    description: Set kwok's pod-complete delay annotations (the embedded cluster).
    type: bool
    default: true
  resource:
    description: The GPU resource the Jobs request.
    type: str
    default: nvidia.com/gpu
  late_limit:
    description: Seconds a Job may be created after its time before the task fails.
    type: float
    default: 30
requirements:
  - kubernetes >= 24.2.0
notes:
  - Check mode creates nothing and reports the Jobs that would be created.
"""

EXAMPLES = r"""
- name: Submit the replay
  fairgpu.tenancy.replay_submit:
    jobs: "{{ replay.jobs }}"
    run_id: busy-day
    kubeconfig: "{{ run_settings.connection.kubeconfig }}"
"""

RETURN = r"""
started:
  description: Unix time at which the replay's clock started (C(at) 0).
  returned: always
  type: float
created:
  description: Jobs created by this run.
  returned: always
  type: int
existing:
  description: Jobs that already existed and were left alone.
  returned: always
  type: int
submitted:
  description: Each Job as C({name, namespace, tenant, at, created_at (Unix time), late (seconds), existed}).
  returned: always
  type: list
  elements: dict
lateness:
  description: C({count, max, mean}) of the seconds the created Jobs came after their time.
  returned: always
  type: dict
"""

import copy
import time

from ansible_collections.kubernetes.core.plugins.module_utils.ansiblemodule import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import GPU_RESOURCE, REPLAY_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.schedule import due, job_manifest, lateness

try:
    from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError
except ImportError:
    pass  # AnsibleK8SModule reports the missing kubernetes library


def argspec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        jobs=dict(type="list", elements="dict", required=True),
        run_id=dict(type="str", required=True),
        image=dict(type="str", default="busybox:1.37"),
        simulated=dict(type="bool", default=True),
        resource=dict(type="str", default=GPU_RESOURCE),
        late_limit=dict(type="float", default=30),
    )
    return spec


def run(module, client, monotonic=time.monotonic, sleep=time.sleep, wall=time.time):
    params = module.params
    jobs = sorted(params["jobs"], key=lambda j: (j["at"], j["name"]))
    resource = client.resource("Job", "batch/v1")
    # Jobs of this replay that exist already are left alone, without waiting for their time (a second run).
    try:
        present = set((j["metadata"]["namespace"], j["metadata"]["name"]) for namespace in
                      sorted(set(job["namespace"] for job in jobs)) for j in
                      client.get(resource, namespace=namespace,
                                 label_selector="%s=%s" % (REPLAY_LABEL, params["run_id"])).to_dict()["items"])
    except DynamicApiError as exc:
        module.fail_json(msg="cannot read the Jobs of replay %s: %s %s" % (params["run_id"], exc.status, exc.reason))
    records = [{"name": job["name"], "namespace": job["namespace"], "tenant": job["tenant"], "at": job["at"],
                "created_at": None, "late": 0.0, "existed": True}
               for job in jobs if (job["namespace"], job["name"]) in present]
    jobs = [job for job in jobs if (job["namespace"], job["name"]) not in present]
    start, started = monotonic(), wall()
    done = 0
    while done < len(jobs):
        ready, wait = due(jobs, monotonic() - start, done)
        for job in ready:
            manifest = job_manifest(job, params["run_id"], params["image"], params["simulated"], params["resource"])
            existed = False
            if not module.check_mode:
                try:
                    client.create(resource, manifest, namespace=job["namespace"])
                except ConflictError:
                    existed = True
                except DynamicApiError as exc:
                    module.fail_json(msg="cannot create Job %s/%s: %s %s"
                                     % (job["namespace"], job["name"], exc.status, exc.reason),
                                     submitted=records, started=started)
            late = max(0.0, monotonic() - start - job["at"])
            records.append({"name": job["name"], "namespace": job["namespace"], "tenant": job["tenant"],
                            "at": job["at"], "created_at": round(wall(), 3), "late": round(late, 3),
                            "existed": existed})
            if late > params["late_limit"] and not existed:
                module.fail_json(msg="replay_submit: Job %s came %.1f s after its time (late_limit %s s): the "
                                 "API server is too slow for this compression; give a smaller replay_compression"
                                 % (job["name"], late, params["late_limit"]), submitted=records, started=started)
        done += len(ready)
        if wait is not None and wait > 0:
            sleep(min(wait, 1.0))
    created = [r for r in records if not r["existed"]]
    module.exit_json(changed=bool(created), started=started, created=len(created),
                     existing=len(records) - len(created), submitted=records, lateness=lateness(created))


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argspec(), supports_check_mode=True)
    try:
        run(module, get_api_client(module))
    except CoreException as exc:
        module.fail_from_exception(exc)


if __name__ == "__main__":
    main()
