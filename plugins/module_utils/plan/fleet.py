# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""A fleet: one inventory, one cluster per inventory host. Pure logic, no cluster access:

- ``fleet_errors``: the whole inventory checked before the first cluster is touched. Two hosts must never be one
  cluster: embedded clusters (provider ``kwok``) on this machine need distinct names (a name is a directory of
  state, ``<run_state_dir>/kwok/clusters/<name>``) and distinct local ports; kind clusters distinct names; two
  hosts must not reach one API server through the same kubeconfig and context.
- ``policy_errors`` and ``batches``: the roll-out policy of ``site.yml`` (``fleet_serial``,
  ``fleet_max_fail_percentage``) and the batches Ansible makes of it. Ansible's rules (ansible-core 2.19,
  ``lib/ansible/executor/playbook_executor.py`` ``_get_serialized_batches`` and ``lib/ansible/utils/helpers.py``
  ``pct_to_int``; "Controlling playbook execution: strategies and more" in the Ansible documentation): ``serial``
  is a number, a percentage or a list of them, the last one repeating; a percentage is of all the play's hosts,
  truncated, and at least 1 (``[1, "50%"]`` over 3 hosts gives batches of 1, 1 and 1); 0 or less takes every
  host left. ``max_fail_percentage`` stops the play when the failed share of a batch *exceeds* it, and a batch in
  which every host fails stops the play whatever it says.
- ``report``: the fleet report's rows and Markdown, from what the fleet_report callback plugin gathered.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Ansible takes a value ending in "%" as a percentage and int() of anything else (pct_to_int): no spaces.
_PERCENT = re.compile(r"^([0-9]+)%$")
_NUMBER = re.compile(r"^[0-9]+$")


def _serial_item_error(value):
    if isinstance(value, bool):
        return "%r is not a number of hosts or a percentage" % (value,)
    if isinstance(value, int):
        return None
    if isinstance(value, str) and (_NUMBER.match(value) or _PERCENT.match(value)):
        return None
    return "%r is not a number of hosts or a percentage such as \"25%%\" (no spaces)" % (value,)


def policy_errors(serial, max_fail_percentage):
    """Messages for the roll-out policy: ``serial`` (``fleet_serial``: a number, a percentage string or a non-empty
    list of them) and ``max_fail_percentage`` (``fleet_max_fail_percentage``: a number from 0 to 100). [] when
    fine."""
    errors = []
    items = serial if isinstance(serial, list) else [serial]
    if not items:
        errors.append("fleet_serial: an empty list; give the batch sizes, such as [1, \"50%\"] (a canary, then "
                      "half the fleet at a time)")
    for index, item in enumerate(items):
        problem = _serial_item_error(item)
        if problem:
            where = "fleet_serial[%d]" % index if isinstance(serial, list) else "fleet_serial"
            errors.append("%s: %s" % (where, problem))
    try:
        # Ansible's percent fields take "50%" as 50 (FieldAttribute isa="percent").
        percent = float(str(max_fail_percentage).rstrip("%") if isinstance(max_fail_percentage, str)
                        else max_fail_percentage)
    except (TypeError, ValueError):
        percent = None
    if isinstance(max_fail_percentage, bool) or percent is None or not 0 <= percent <= 100:
        errors.append("fleet_max_fail_percentage: %r is not a percentage from 0 to 100 (0 stops the roll-out on the "
                      "first failed cluster, 100 only when a whole batch fails)" % (max_fail_percentage,))
    return errors


def _size(item, total):
    """One batch size as Ansible computes it (``pct_to_int`` with its minimum of 1)."""
    match = _PERCENT.match(item) if isinstance(item, str) else None
    if match:
        return int((int(match.group(1)) / 100.0) * total) or 1
    return int(item)


def batches(hosts, serial):
    """The batches Ansible runs ``hosts`` (a list, in inventory order) in under ``serial``: a list of lists.
    ``serial`` as for ``policy_errors``; None or an empty list runs every host in one batch."""
    hosts = list(hosts)
    items = serial if isinstance(serial, list) else ([] if serial is None else [serial])
    if not items:
        return [hosts] if hosts else []
    result, position, total = [], 0, len(hosts)
    while hosts:
        size = _size(items[min(position, len(items) - 1)], total)
        if size <= 0:
            result.append(hosts)
            break
        result.append(hosts[:size])
        hosts = hosts[size:]
        position += 1
    return result


def _listeners(member):
    """``[(port, variable)]`` an embedded cluster listens on, on 127.0.0.1 of this machine."""
    ports = [(int(port), "run_local_ports.%s" % name) for name, port in sorted((member.get("ports") or {}).items())
             if str(port).isdigit()]
    apiserver = member.get("apiserver_port")
    if str(apiserver).isdigit() and int(apiserver) > 0:
        ports.append((int(apiserver), "lab_cluster_apiserver_port"))
    return ports


def kubeconfig_server(data, context=""):
    """``(context, server URL)`` a kubeconfig (``data``: the parsed file, or None) reaches: the named ``context``, or
    its ``current-context`` when ``context`` is empty; ``(context, "")`` when the file does not say."""
    data = data if isinstance(data, dict) else {}
    context = context or data.get("current-context") or ""
    entry = next((c.get("context") or {} for c in data.get("contexts") or [] if c.get("name") == context), {})
    cluster = next((c.get("cluster") or {} for c in data.get("clusters") or [] if c.get("name") == entry.get("cluster")),
                   {})
    return context, str(cluster.get("server") or "").rstrip("/")


_LOCAL_SERVER = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\]):([0-9]+)$")


def fleet_errors(members):
    """Every collision between the inventory's clusters, one message each naming both hosts and the fix; [] when
    each host is a cluster of its own. ``members``: one dict per inventory host, ``{"host", "provider",
    "cluster_name", "ports": {name: port} (run_settings.local.ports), "apiserver_port"
    (lab_cluster_apiserver_port), "kubeconfig" (absolute, normalised path), "context", "kubeconfig_data" (the
    parsed file when it exists, else None)}``. Two hosts are one cluster when their kubeconfigs reach the same API
    server (the context's cluster's ``server``; an empty context is the file's ``current-context``), or, when the
    file says nothing, when the path and context are the same; an ``existing`` host whose server is 127.0.0.1 on an
    embedded cluster's port is that embedded cluster."""
    errors = []
    names, listeners, reaches = {}, {}, {}
    for member in members:
        host, provider = member["host"], member.get("provider")
        if provider in ("kwok", "kind"):
            key = (provider, member.get("cluster_name"))
            if key in names:
                errors.append("hosts %s and %s: both are %s clusters named %r on this machine; give each its own "
                              "cluster_name" % (names[key], host, "embedded" if provider == "kwok" else "kind",
                                                member.get("cluster_name")))
            names.setdefault(key, host)
        if provider == "kwok":
            for port, variable in _listeners(member):
                if port in listeners and listeners[port][0] != host:
                    errors.append("hosts %s (%s) and %s (%s): both embedded clusters listen on 127.0.0.1:%d; give "
                                  "each its own ports" % (listeners[port][0], listeners[port][1], host, variable,
                                                          port))
                listeners.setdefault(port, (host, variable))
    for member in members:
        host = member["host"]
        if member.get("provider") == "kwok" or not member.get("kubeconfig"):
            continue
        context, server = kubeconfig_server(member.get("kubeconfig_data"), member.get("context") or "")
        local = _LOCAL_SERVER.match(server)
        if local and int(local.group(2)) in listeners and listeners[int(local.group(2))][1] == \
                "lab_cluster_apiserver_port":
            errors.append("hosts %s and %s: %s's kubeconfig reaches %s, the API server of embedded cluster %s; one "
                          "inventory host is one cluster: remove one" % (listeners[int(local.group(2))][0], host, host,
                                                                         server, listeners[int(local.group(2))][0]))
        key = ("server", server) if server else ("file", member["kubeconfig"], context)
        if key in reaches:
            errors.append("hosts %s and %s: both reach the cluster %s; one inventory host is one cluster: remove one "
                          "or point it at its own cluster"
                          % (reaches[key], host, server if server else "of kubeconfig %s%s" % (
                              member["kubeconfig"], (" context %s" % context) if context else " (its current context)")))
        reaches.setdefault(key, host)
    return errors


RESULT_COLUMNS = ("cluster", "provider", "path", "kueue", "tenants", "changed", "validation", "failure", "last run")


def not_checked_reason(failure):
    """Why a cluster of a drift check (a run under --check) was not checked, from its ``failure`` (``{"task",
    "message"}`` or None): ``"<task>: <message>"``, or None when it was checked (no failure)."""
    if not failure:
        return None
    return "%s: %s" % (failure.get("task") or "?", failure.get("message") or "failed")


def report_rows(hosts):
    """The fleet report's rows, one per inventory host in name order: ``{column: text}`` over RESULT_COLUMNS.
    ``hosts``: ``{host: {"provider", "path", "kueue_version", "tenants": ["<tenant> <devices> <resource>"],
    "changed": [task names], "check_mode": bool, "not_checked": reason | None (under --check, a cluster whose run
    failed or stopped: its "changed" says "not checked", never "nothing", and "failure" why), "failure": {"task", "message"}
    | None (the last site.yml,
    tenants.yml or teardown.yml run), "validation": "passed" | "failed" | "not run", "report": path,
    "validation_failure": {"task", "message"} | None (the last validate.yml run), "last_run": text}}``."""
    rows = []
    for host in sorted(hosts):
        data = hosts[host]
        tenants = ", ".join(data.get("tenants") or [])
        changed = data.get("changed") or []
        verb = "would change" if data.get("check_mode") else "changed"
        failure = data.get("failure") or data.get("validation_failure")
        rows.append({
            "cluster": host, "provider": data.get("provider") or "", "path": data.get("path") or "",
            "kueue": data.get("kueue_version") or "", "tenants": tenants,
            "changed": "not checked" if data.get("check_mode") and data.get("not_checked")
            else ("%s %d: %s" % (verb, len(changed), "; ".join(changed))) if changed else "nothing",
            "validation": data.get("validation") or "not run",
            "failure": ("%s: %s" % (failure["task"], failure["message"])) if failure else "",
            "last run": data.get("last_run") or "",
        })
    return rows


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def report_markdown(hosts, playbook, when):
    """The fleet report as Markdown: a heading with the playbook and time, the table of ``report_rows``."""
    rows = report_rows(hosts)
    failed = [row["cluster"] for row in rows if row["failure"] or row["validation"] == "failed"]
    unchecked = [host for host in sorted(hosts) if hosts[host].get("check_mode") and hosts[host].get("not_checked")]
    lines = ["# fairgpu fleet report", "",
             "Last playbook: `%s` at %s. Clusters: %d; with a failure: %s.%s" % (
                 playbook, when, len(rows), ", ".join(failed) if failed else "none",
                 (" Not checked (--check): %s." % ", ".join(unchecked)) if unchecked else ""), "",
             "| " + " | ".join(RESULT_COLUMNS) + " |", "|" + "---|" * len(RESULT_COLUMNS)]
    lines.extend("| " + " | ".join(_cell(row[column]) for column in RESULT_COLUMNS) + " |" for row in rows)
    return "\n".join(lines) + "\n"
