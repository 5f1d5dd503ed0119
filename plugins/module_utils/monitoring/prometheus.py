# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Prometheus's HTTP API as the validation reads it (https://prometheus.io/docs/prometheus/latest/querying/api/):
an instant query, a range query and the alerting rules, through Ansible's ``open_url``. The lab's Prometheus
answers on loopback (monitoring_mode local)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.module_utils.six.moves.urllib.parse import urlencode
from ansible.module_utils.urls import open_url


class PrometheusError(Exception):
    """Prometheus did not answer, or answered an error."""


class Prometheus(object):
    """``url``: the server's base URL (``http://127.0.0.1:19090``); ``opener``: ``open_url``'s signature."""

    def __init__(self, url, opener=open_url, timeout=30):
        self.url, self.opener, self.timeout = url.rstrip("/"), opener, timeout

    def _data(self, path, form=None):
        try:
            if form is None:
                answer = self.opener(self.url + path, method="GET", timeout=self.timeout)
            else:
                answer = self.opener(self.url + path, method="POST", data=urlencode(form), timeout=self.timeout,
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
            body = json.loads(answer.read())
        except Exception as exc:  # any failure to reach or read it is the same to the caller
            raise PrometheusError("Prometheus at %s%s: %s" % (self.url, path, exc))
        if body.get("status") != "success":
            raise PrometheusError("Prometheus at %s%s: %s" % (self.url, path, body.get("error") or body))
        return body["data"]

    def query(self, query):
        """The instant query's result (a vector: ``[{"metric", "value"}]``)."""
        return self._data("/api/v1/query", {"query": query})["result"]

    def query_range(self, query, start, end, step):
        """The range query's result (a matrix: ``[{"metric", "values"}]``); ``start``, ``end``: Unix seconds."""
        return self._data("/api/v1/query_range", {"query": query, "start": start, "end": end, "step": step})["result"]

    def rules(self):
        """The alerting rule groups Prometheus evaluates (``/api/v1/rules?type=alert``)."""
        return self._data("/api/v1/rules?type=alert").get("groups") or []

    def targets(self):
        """The active scrape targets (``/api/v1/targets?state=active``), each with ``labels.job``, ``health``
        (``up``, ``down``, ``unknown``) and ``lastError``."""
        return self._data("/api/v1/targets?state=active").get("activeTargets") or []


def ready(targets, groups, jobs, alerts):
    """Whether Prometheus scrapes every job of ``jobs`` healthily and evaluates exactly the alerting rules of
    ``alerts`` (``{name: for in seconds}``, the rule file as written), each with its ``for:``: ``(held, observed)``
    with one line of what it answered. ``targets``, ``groups``: ``Prometheus.targets()`` and ``rules()``; a job
    counts as up when one of its targets is. Jobs not in ``jobs`` do not count either way: a MultiKueue manager's
    federation of its workers (objects.FLEET_JOB) answers once the workers' Prometheus run, which a roll-out in
    batches may bring up after the manager's."""
    up = sorted(set(t.get("labels", {}).get("job") for t in targets if t.get("health") == "up"))
    loaded = dict((r.get("name"), float(r.get("duration") or 0)) for g in groups for r in g.get("rules") or [])
    wanted = dict((name, float(seconds or 0)) for name, seconds in alerts.items())
    targets_seen = ", ".join("%s %s%s" % (t.get("labels", {}).get("job"), t.get("health"),
                                          " (%s)" % t["lastError"] if t.get("lastError") else "")
                             for t in targets) or "none"
    rules_seen = ", ".join("%s for %gs" % (name, loaded[name]) for name in sorted(loaded)) or "none"
    observed = "targets: %s; alerting rules: %s" % (targets_seen, rules_seen)
    return set(jobs) <= set(up) and loaded == wanted, observed
