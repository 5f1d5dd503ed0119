# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The judges of the ``wait_until`` module's conditions on what the cluster's API answered. Pure logic: each takes
what one read returned and gives ``(held, observed)``, whether the condition holds and one line of what was seen,
the line a failure message ends with. The reads, the clock and the conditions on other sources (Prometheus, the
MIG manager) are the module's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def _name(obj):
    return (obj.get("metadata") or {}).get("name")


def node_ready(node):
    """Whether a Node object (an API dict) has its ``Ready`` condition ``True``."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def api_answers(error):
    """``error``: None when the API server answered the read, else what the client raised (a line)."""
    return error is None, error or "answered"


def nodes_ready(nodes, names):
    """Every Node in ``names`` is listed and its ``Ready`` condition is ``True`` (``nodes``: the Node objects as API
    dicts). A node listed but not wanted does not count against it."""
    listed = dict((_name(n), n) for n in nodes)
    missing = sorted(n for n in names if n not in listed)
    unready = sorted(n for n in names if n in listed and not node_ready(listed[n]))
    observed = "; ".join(part for part in (
        "not Ready: " + ", ".join(unready) if unready else "",
        "not listed: " + ", ".join(missing) if missing else "") if part)
    return not (missing or unready), observed or "all Ready: " + ", ".join(sorted(names))


def resource_advertised(nodes, resource):
    """At least one node is listed and every one lists ``resource`` in ``status.allocatable`` (the device plugin's
    registration with the kubelet, the way the scheduler sees a GPU)."""
    if not nodes:
        return False, "no node matches the label selectors"
    without = sorted(_name(n) for n in nodes if resource not in ((n.get("status") or {}).get("allocatable") or {}))
    if without:
        return False, "%s not in status.allocatable of %s" % (resource, ", ".join(without))
    return True, "%s advertised by %s" % (resource, ", ".join(sorted(_name(n) for n in nodes)))


def secret_key(secret, key):
    """The Secret exists and ``data.<key>`` is not empty (the token controller fills a service-account-token
    Secret after it is created)."""
    if not secret:
        return False, "the Secret does not exist"
    if not (secret.get("data") or {}).get(key):
        return False, "data.%s of Secret %s is empty" % (key, _name(secret))
    return True, "data.%s of Secret %s is set" % (key, _name(secret))


def admitted(error):
    """``error``: None when the API server's admission (its webhooks included) passed a server-side dry-run create,
    else the answer (a line)."""
    return error is None, error or "admitted"
