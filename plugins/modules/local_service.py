#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: local_service
short_description: Run one local process of the embedded cluster as a service
version_added: 0.1.0
description:
  - Runs one local process of the embedded cluster (the lab) as a service on the machine the task runs on. It
    starts the process, stops it, restarts it when its command line or a watched file changed, reloads it, and
    waits until it is ready. The processes are the local Kueue controller, Prometheus, the simulated DCGM
    exporter, the simulated kubelet and the simulated MIG manager. It exists only for those; it is no service
    manager for anything else.
  - It replaces C(start-stop-daemon) and the tasks each role had around it (the command line written to a file,
    C(--status), a stop when the file changed, C(--start --background --make-pidfile), a loop polling a URL). The
    pidfile keeps C(start-stop-daemon)'s format, so C(start-stop-daemon --stop --pidfile <workdir>/<name>.pid)
    still stops the process.
  - "A service O(name) in O(workdir) has three files: C(<name>.pid) (the pid in decimal and a newline),
    C(<name>.log) (the process's stdout and stderr, appended to) and C(<name>.service.json) (the record: what the
    running process was started with, that is O(argv), O(environment), O(chdir), the sha256 of each file of
    O(restart_on) and O(reload_on), and O(record))."
  - The process runs when the pidfile names a live process that is not a zombie, started before the pidfile was
    written (a pid reused after a reboot is not the service's) and runs the program. Its
    C(/proc/<pid>/cmdline) starts with the program, the first element of O(argv) (or the program of the stored record, so that a new binary
    still finds the old process), or its C(/proc/<pid>/exe) is the same file. A script started through its C(#!)
    line counts when its path is the first or second argument of its interpreter. Any other pidfile is stale, the
    same as no pidfile, and is replaced at the next start.
  - The process is started detached. It gets a session of its own, stdin from C(/dev/null), stdout and stderr
    appended to the log, and none of the module's other files, so Ansible does not wait for it. The module does
    not wait for it to exit.
  - "Not done: no supervision. A process that dies stays dead until the next run of the task starts it again;
    nothing watches it in the background. Nor does the module find a copy of the process that no pidfile names
    (a second copy would then be started, and most likely fail to bind its port: the readiness wait reports
    that with the log)."
  - Check mode is supported. It reports what would be done (RV(changed), RV(action), RV(reasons)) and does
    nothing. A file of O(restart_on) or O(reload_on) or the program of O(argv) that does not exist yet is then a
    warning, not an error, since an earlier task of the run may create it. With diff mode, the record before and
    after is returned when it would change.
author:
  - fairgpu maintainers (!UNKNOWN)
options:
  name:
    description:
      - The service's name. Its files are C(<name>.pid), C(<name>.log) and C(<name>.service.json) in O(workdir).
      - Letters, digits, C(.), C(_) and C(-), not starting with C(.), C(_) or C(-).
    type: str
    required: true
  workdir:
    description:
      - The directory of the service's files, an absolute path. Created with mode C(0700) when missing (an existing
        one keeps its mode).
    type: path
    required: true
  argv:
    description:
      - The command line, the program first. The program must be the absolute path of an executable file (for a
        Python script, C({{ ansible_playbook_python }}) and then the script). A relative name is refused, since
        the module does not search C(PATH).
      - Required unless O(state=stopped). With O(state=stopped) it only narrows which process the pidfile may name.
    type: list
    elements: str
  environment:
    description:
      - Variables added to the module's environment for the process (C(PYTHONPATH), say). Values must be strings.
      - They are part of the record, so a change restarts the process. Variables given with the task's
        C(environment) keyword instead reach the process too but are not recorded.
    type: dict
    default: {}
  chdir:
    description:
      - The process's working directory; O(workdir) when not given. Part of the record.
    type: path
  restart_on:
    description:
      - Absolute paths of files whose content (sha256) is part of the record. When one changed since the process
        was started, a running process is restarted (C(restart_on file changed) in RV(reasons)). For example a
        configuration the process reads only at start, its certificates, the code of a simulator.
      - A file that does not exist is an error naming it (a warning in check mode).
    type: list
    elements: path
    default: []
  reload_on:
    description:
      - Absolute paths of files whose change, when nothing else of the record changed, sends O(reload_signal) to
        the running process instead of a restart (C(reload_on file changed) in RV(reasons)). Prometheus reads its
        configuration and rule files again on C(SIGHUP).
      - A file that does not exist is an error naming it (a warning in check mode).
    type: list
    elements: path
    default: []
  reload_signal:
    description:
      - The signal of a reload.
    type: str
    choices: [HUP, USR1, USR2]
    default: HUP
  record:
    description:
      - Anything else whose change must restart the process, stored in the record (a digest of a simulator's code,
        a version). Compared key by key (C(record changed) in RV(reasons)).
    type: dict
    default: {}
  state:
    description:
      - C(started) starts the process when it does not run. A running process is restarted when the record it was
        started with differs from the one asked for (or there is none), reloaded when only the files of O(reload_on)
        differ, and otherwise left alone (RV(changed) false).
      - C(restarted) stops and starts a running process, and starts one that does not run.
      - C(reloaded) sends O(reload_signal) to a running process (only the O(reload_on) digests of the record are
        updated, the rest is left for a later O(state=started) to act on), and starts one that does not run.
      - C(stopped) stops a running process (SIGTERM, then SIGKILL after O(stop_timeout) seconds) and removes the
        pidfile (a stale one too). The record is kept.
    type: str
    choices: [started, stopped, restarted, reloaded]
    default: started
  ready_url:
    description:
      - A URL (C(http://) or C(https://); https without a certificate check, the process listens on loopback; no
        proxy) that answers O(ready_status) once the process is ready.
      - After a start, a restart or a reload it is polled every O(ready_interval) seconds for at most
        O(ready_timeout) seconds. Timing out fails with the URL, the seconds, what was last observed (a status
        code or the connection error) and the last 15 lines the log got since the start. A process that exits
        during the wait fails it at once, with its exit code and the log's last lines.
      - When nothing changed and the process runs, one request is made, without a wait, and the task fails unless
        it answers O(ready_status). That request is made in check mode too.
      - Without it, the module checks 0.3 seconds after a start or a reload that the process still runs, and fails
        with the end of the log if it exited.
    type: str
  ready_status:
    description:
      - The HTTP status code of O(ready_url) that means ready.
    type: int
    default: 200
  ready_timeout:
    description:
      - The longest wait, in seconds, for O(ready_url) to answer O(ready_status) after a start, restart or reload.
    type: int
    default: 60
  ready_interval:
    description:
      - Seconds between two requests to O(ready_url) while waiting. The process is checked for having exited more
        often (every 0.05 seconds).
    type: float
    default: 1.0
  stop_timeout:
    description:
      - Seconds a process has to exit after SIGTERM before it gets SIGKILL, after which it has 5 seconds more
        (C(start-stop-daemon --retry TERM/<stop_timeout>/KILL/5)). Applies to stops and restarts.
    type: int
    default: 15
notes:
  - Runs on Linux only (it reads C(/proc)), on Python 3.
  - It is meant for C(localhost), the machine of the embedded cluster. The files of O(restart_on) and O(reload_on)
    are read on the machine the task runs on.
"""

EXAMPLES = r"""
- name: Run the local Kueue controller, restarted when its configuration, kubeconfig or certificates change
  fairgpu.tenancy.local_service:
    name: kueue
    workdir: "{{ kueue_local_workdir }}"
    argv: "{{ kueue_local_argv }}"
    restart_on:
      - "{{ kueue_local_workdir }}/config.yaml"
      - "{{ kueue_local_workdir }}/kubeconfig.yaml"
      - "{{ kueue_local_workdir }}/certs/tls.crt"
    ready_url: "http://127.0.0.1:{{ kueue_local_health_port }}/readyz"
    ready_timeout: "{{ kueue_wait_timeout | int }}"

- name: Run Prometheus, reloaded (SIGHUP) when its configuration, rules or token change
  fairgpu.tenancy.local_service:
    name: prometheus
    workdir: "{{ monitoring_local_workdir }}"
    argv: "{{ [monitoring_prometheus_binary] + monitoring_prometheus_args }}"
    reload_on:
      - "{{ monitoring_local_workdir }}/prometheus.yml"
      - "{{ monitoring_local_workdir }}/rules/fairgpu-alerts.rules.yml"
      - "{{ monitoring_local_workdir }}/token"
    reload_signal: HUP
    ready_url: "http://127.0.0.1:{{ monitoring_prometheus_port }}/-/ready"

- name: Run the simulated kubelet, restarted when its code changes
  fairgpu.tenancy.local_service:
    name: kubelet
    workdir: "{{ cluster_kubelet_workdir }}"
    argv: "{{ [ansible_playbook_python] + cluster_kubelet_args }}"
    environment:
      PYTHONPATH: "{{ cluster_kubelet_workdir }}/lib"
    restart_on:
      - "{{ cluster_collection_root }}/files/lab/kubelet_sim.py"
      - "{{ cluster_collection_root }}/plugins/module_utils/lab/kubelet.py"

- name: Stop the simulated MIG manager
  fairgpu.tenancy.local_service:
    name: mig-manager
    workdir: "{{ mig_config_simulated_workdir }}"
    state: stopped
    stop_timeout: 10
"""

RETURN = r"""
changed:
  description: Whether the process was started, restarted, reloaded or stopped (in check mode, would be).
  returned: always
  type: bool
  sample: true
action:
  description: What was done (in check mode, what would be done).
  returned: always
  type: str
  choices: [none, started, restarted, reloaded, stopped]
  sample: restarted
reasons:
  description:
    - Why RV(action) was done. C(not running); C(the command line changed); C(the environment changed); C(the
      working directory changed); C(restart_on file changed) and the path; C(record changed) and the key;
      C(reload_on file changed) and the path; C(no record of how the running process was started); C(state
      restarted), C(state reloaded) or C(state stopped) followed by the differences found. Empty when nothing was
      done.
  returned: always
  type: list
  elements: str
  sample: ["the command line changed", "restart_on file changed: /home/me/.local/share/fairgpu/kueue/fairgpu/config.yaml"]
pid:
  description: The pid of the process that runs after the task; null when none runs (O(state=stopped)), and in check
    mode when it would be started.
  returned: always
  type: int
  sample: 41234
log:
  description: The path of the process's log (stdout and stderr, appended to).
  returned: always
  type: str
  sample: /home/me/.local/share/fairgpu/kueue/fairgpu/kueue.log
ready_seconds:
  description: Seconds until O(ready_url) answered O(ready_status) (after a start, restart or reload, or the one
    request when nothing changed); null without O(ready_url), after a stop, and in check mode unless that one request
    was made.
  returned: always
  type: float
  sample: 2.314
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.service import (
    RELOAD_SIGNALS,
    STATES,
    LocalService,
    ServiceError,
)


def argspec():
    return dict(
        name=dict(type="str", required=True),
        workdir=dict(type="path", required=True),
        argv=dict(type="list", elements="str"),
        environment=dict(type="dict", default={}),
        chdir=dict(type="path"),
        restart_on=dict(type="list", elements="path", default=[]),
        reload_on=dict(type="list", elements="path", default=[]),
        reload_signal=dict(type="str", choices=sorted(RELOAD_SIGNALS), default="HUP"),
        record=dict(type="dict", default={}),
        state=dict(type="str", choices=list(STATES), default="started"),
        ready_url=dict(type="str"),
        ready_status=dict(type="int", default=200),
        ready_timeout=dict(type="int", default=60),
        ready_interval=dict(type="float", default=1.0),
        stop_timeout=dict(type="int", default=15),
    )


def environment(module):
    """The option ``environment`` with numbers as strings (what YAML makes of ``PORT: 8080``)."""
    values = {}
    for key, value in module.params["environment"].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        values[str(key)] = value
    return values


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("state", "started", ["argv"]), ("state", "restarted", ["argv"]), ("state", "reloaded", ["argv"])],
    )
    params = module.params
    service = LocalService(
        params["name"], params["workdir"], argv=params["argv"], environment=environment(module),
        chdir=params["chdir"], restart_on=params["restart_on"], reload_on=params["reload_on"],
        reload_signal=params["reload_signal"], record=params["record"], stop_timeout=params["stop_timeout"],
        ready_url=params["ready_url"], ready_status=params["ready_status"], ready_timeout=params["ready_timeout"],
        ready_interval=params["ready_interval"])
    try:
        result = service.run(params["state"], check_mode=module.check_mode)
    except ServiceError as exc:
        for warning in service.warnings:
            module.warn(warning)
        facts = dict(exc.facts)
        facts.setdefault("changed", False)
        facts.setdefault("log", service.log)
        module.fail_json(msg=str(exc), **facts)
    for warning in service.warnings:
        module.warn(warning)
    diff = result.pop("diff")
    if module._diff and diff is not None:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
