# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report: one row per cluster after every fairgpu playbook."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_report
type: aggregate
version_added: 0.1.0
short_description: Write the fleet report, one row per cluster, after every fairgpu playbook
description:
  - After each playbook run, updates C(report.json) and C(report.md) in O(results_dir) with a row per inventory host
    (one cluster each) - provider, path, Kueue version, tenants and their guarantees, what the run changed (what it
    would change under C(--check), which makes a drift check of the fleet), the validation verdict and, for a cluster
    that failed, the task and its message.
  - The roles publish what they know with C(ansible.builtin.set_stats) under the key C(fairgpu) (role C(run) -
    provider, cluster_name, path, kueue_version; role C(tenants) - tenants; role C(validate) - validation, report);
    the changed and failed tasks come from the run's own results. A failure that a rescue handled is not reported.
  - Rows of clusters the run did not reach are kept from earlier runs, so a C(site.yml) run and a C(validate.yml) run
    fill one page. The columns C(changed) and C(failure) are those of the last C(site.yml), C(tenants.yml) or
    C(teardown.yml) run; C(validation) that of the last C(validate.yml) run; the run role's C(run_playbook) says
    which playbook ran (the file name when the run stopped before it), so a playbook that imports one counts as it.
  - Runs at once (two people, C(make test)'s two lanes) take turns on the report - an exclusive lock on
    C(report.lock) in O(results_dir) while one reads, updates and writes it, each file written whole and renamed into
    place - so no run reads a half-written report or drops the rows another run just wrote.
  - Under C(--check) (the drift check) a cluster whose run failed or never finished (an API server that does not
    answer, a bad kubeconfig) is reported C(not checked) with the reason, not C(nothing), since its C(changed) is no
    answer. C(site.yml --check) checks every cluster in one batch, and one failure stops no other.
  - A cluster that C(site.yml) checked but whose roll-out never finished (a batch before it failed, or
    C(max_fail_percentage) cut its batch short) is reported as not rolled out; C(site.yml) publishes C(completed)
    as its last task.
requirements:
  - Enabled in ansible.cfg (C(callbacks_enabled = fairgpu.tenancy.fleet_report)), as this collection's ansible.cfg does.
options:
  results_dir:
    description: The directory of C(report.json) and C(report.md); a relative path is taken from the working directory.
    type: path
    default: results/fleet
    env:
      - name: FAIRGPU_FLEET_REPORT_DIR
    ini:
      - section: fairgpu_fleet_report
        key: results_dir
"""

import datetime
import fcntl
import json
import os
import tempfile

from ansible import context
from ansible.plugins.callback import CallbackBase

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import fleet

# Playbooks whose changes fill the "changed" column (validate.yml's Jobs are its scenarios, not a change to report;
# render.yml reaches no cluster).
CHANGING_PLAYBOOKS = ("site", "tenants", "teardown")
NOT_FINISHED = {"task": "(not reached)", "message": "the roll-out stopped before this cluster finished: a batch before "
                "it failed, or fleet_max_fail_percentage cut its batch short"}
# Tasks that only bookkeep.
QUIET_ACTIONS = ("ansible.builtin.set_fact", "set_fact", "ansible.builtin.set_stats", "set_stats")
MESSAGE_LIMIT = 600


def _replace(path, text):
    """Write ``text`` to ``path`` through a temporary file in its directory renamed over it (atomic on POSIX)."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".%s." % os.path.basename(path))
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _message(result):
    """A failed result's message, with the messages of its failed loop items."""
    parts = [str(result.get("msg") or result.get("stderr") or "failed")]
    parts.extend("item %s: %s" % (item.get("_ansible_item_label", item.get("item")), item.get("msg", "failed"))
                 for item in result.get("results") or [] if isinstance(item, dict) and item.get("failed"))
    text = "; ".join(parts)
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + "..."


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fairgpu.tenancy.fleet_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._playbook = ""
        self._changed = {}
        self._failures = {}

    def v2_playbook_on_start(self, playbook):
        # Several playbooks in one ansible-playbook call: one report at the end, named after all of them.
        name = os.path.basename(getattr(playbook, "_file_name", "") or "")
        self._playbook = (self._playbook + ", " + name) if self._playbook else name

    def v2_runner_on_ok(self, result):
        if result._result.get("changed") and result._task.action not in QUIET_ACTIONS:
            names = self._changed.setdefault(result._host.get_name(), [])
            if result._task.get_name() not in names:
                names.append(result._task.get_name())

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failures[result._host.get_name()] = {"task": result._task.get_name(),
                                                       "message": _message(result._result)}

    def v2_runner_on_unreachable(self, result):
        self._failures[result._host.get_name()] = {"task": result._task.get_name(),
                                                   "message": "unreachable: " + _message(result._result)}

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed)
        if not hosts:
            return
        directory = os.path.abspath(os.path.expanduser(self.get_option("results_dir")))
        # Several runs at once (make test's two lanes, a person's run beside a scheduled one) each read, update and
        # write the report: under an exclusive lock on report.lock, writing through a temporary file renamed into
        # place, so that no run reads another's half-written file or writes over the rows another just wrote.
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory)
            with open(os.path.join(directory, "report.lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self._update_report(directory, hosts, stats)
        except (IOError, OSError) as exc:
            self._display.warning("fleet report: cannot write %s: %s" % (directory, exc))
            return
        self._display.display("Fleet report: %s" % os.path.join(directory, "report.md"), stderr=True)

    def _update_report(self, directory, hosts, stats):
        """Read report.json in ``directory``, update the rows of ``hosts`` from this run, write it and report.md."""
        path = os.path.join(directory, "report.json")
        try:
            with open(path) as handle:
                report = json.load(handle)
        except (IOError, OSError, ValueError):
            report = {}
        if not isinstance(report, dict) or not isinstance(report.get("hosts"), dict):
            report = {"hosts": {}}
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        check_mode = bool(context.CLIARGS.get("check"))
        published = dict((host, (stats.custom.get(host) or {}).get("fairgpu") or {}) for host in hosts)
        playbooks = set(data["run_playbook"] for data in published.values() if data.get("run_playbook"))
        playbook = playbooks.pop() if len(playbooks) == 1 else os.path.splitext(self._playbook)[0]
        for host in hosts:
            row = report["hosts"].setdefault(host, {})
            row.update((key, value) for key, value in published[host].items()
                       if key not in ("validation", "report", "run_playbook", "completed"))
            failed = bool(stats.failures.get(host) or stats.dark.get(host))
            failure = self._failures.get(host) if failed else None
            if playbook == "validate":
                row["validation"] = published[host].get("validation") or ("failed" if failed else "not run")
                row["report"] = published[host].get("report", "")
                row["validation_failure"] = failure
            elif playbook in CHANGING_PLAYBOOKS:
                row["changed"] = self._changed.get(host, [])
                row["check_mode"] = check_mode
                finished = published[host].get("completed") or playbook != "site"
                row["failure"] = failure or (None if finished else dict(NOT_FINISHED))
                # Under --check (a drift check) a cluster whose run failed or stopped was not checked: its "changed"
                # is no answer. fleet.not_checked_reason says why.
                row["not_checked"] = fleet.not_checked_reason(row["failure"]) if check_mode else None
            row["last_run"] = "%s%s at %s" % (self._playbook, " --check" if check_mode else "", when)
        report.update({"playbook": self._playbook, "time": when})
        markdown = fleet.report_markdown(report["hosts"], self._playbook, when)
        _replace(path, json.dumps(report, indent=2, sort_keys=True))
        _replace(os.path.join(directory, "report.md"), markdown)
