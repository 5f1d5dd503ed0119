# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The kubeconfig a local process of fairgpu's is started with: only the inventory host's context. Pure logic.

kubernetes.core and fairgpu's modules take the context as a parameter (``cluster_context``). The local Kueue
controller does not: ``cmd/kueue`` (kueue v0.19.2 ``cmd/kueue/main.go``) calls controller-runtime's
``ctrl.GetConfigOrDie()``, which loads the ``--kubeconfig`` file with no context override
(controller-runtime ``pkg/client/config/config.go``, ``loadConfig("")``), so it always reaches the file's
``current-context``. A kubeconfig that holds several clusters, with ``cluster_context`` naming one that is not
current, would put Kueue on the other cluster. So the process gets a file of its own holding only that context,
as ``kubectl config view --minify --flatten --context=<name>`` would write it.

clientcmd resolves a relative file path in a kubeconfig (``certificate-authority``, ``client-certificate``,
``client-key``, ``tokenFile``) against the directory of the file it came from (client-go
``tools/clientcmd/loader.go``, ``ResolveLocalPaths``); the copy lives elsewhere, so those paths are made
absolute against the original file's directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# Fields that hold file paths (client-go tools/clientcmd/loader.go, GetClusterFileReferences and
# GetAuthInfoFileReferences).
CLUSTER_FILES = ("certificate-authority",)
USER_FILES = ("client-certificate", "client-key", "tokenFile")


class KubeconfigError(ValueError):
    """The kubeconfig does not hold the context asked for."""


def _named(entries, name):
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return None


def _absolute(section, fields, base_dir):
    section = dict(section or {})
    for field in fields:
        value = section.get(field)
        # as clientcmd's ResolvePath: joined to the file's directory, no "~" expansion
        if isinstance(value, str) and value and not os.path.isabs(value) and base_dir:
            section[field] = os.path.join(base_dir, value)
    return section


def context_names(kubeconfig):
    """The context names of a parsed kubeconfig, in file order."""
    if not isinstance(kubeconfig, dict):
        return []
    return [c.get("name") for c in kubeconfig.get("contexts") or [] if isinstance(c, dict) and c.get("name")]


def context_errors(kubeconfig, context="", path=""):
    """Errors (naming ``cluster_context`` or ``cluster_kubeconfig`` and the fix) when ``context`` (empty: the
    file's current context) is not a complete context of the parsed ``kubeconfig``; ``[]`` when it is."""
    where = path or "the kubeconfig"
    if not isinstance(kubeconfig, dict) or not kubeconfig.get("contexts"):
        return ["cluster_kubeconfig: %s holds no contexts; give the path of a kubeconfig that reaches the cluster"
                % where]
    names = context_names(kubeconfig)
    name = context or kubeconfig.get("current-context") or ""
    if not name:
        return ["cluster_context: %s has no current-context; set cluster_context to one of %s"
                % (where, ", ".join(names))]
    entry = _named(kubeconfig.get("contexts"), name)
    if entry is None:
        return ["%s: %s has no context %r; set cluster_context to one of %s"
                % ("cluster_context" if context else "cluster_kubeconfig", where, name, ", ".join(names))]
    ctx = entry.get("context") or {}
    errors = []
    if _named(kubeconfig.get("clusters"), ctx.get("cluster")) is None:
        errors.append("cluster_context: context %r of %s names cluster %r, which the file does not define"
                      % (name, where, ctx.get("cluster")))
    if ctx.get("user") and _named(kubeconfig.get("users"), ctx.get("user")) is None:
        errors.append("cluster_context: context %r of %s names user %r, which the file does not define"
                      % (name, where, ctx.get("user")))
    return errors


def single_context(kubeconfig, context="", path=""):
    """The kubeconfig (a dict) with only ``context`` (empty: the current one), its cluster and its user, that
    context current, file paths made absolute against ``path``'s directory. Raises KubeconfigError with
    ``context_errors``' message when the context is not complete."""
    errors = context_errors(kubeconfig, context, path)
    if errors:
        raise KubeconfigError("; ".join(errors))
    name = context or kubeconfig.get("current-context")
    entry = _named(kubeconfig["contexts"], name)
    ctx = dict(entry.get("context") or {})
    base_dir = os.path.dirname(os.path.abspath(os.path.expanduser(path))) if path else ""
    cluster = _named(kubeconfig["clusters"], ctx["cluster"])
    result = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster["name"],
                      "cluster": _absolute(cluster.get("cluster"), CLUSTER_FILES, base_dir)}],
        "contexts": [{"name": name, "context": ctx}],
        "current-context": name,
        "users": [],
    }
    if ctx.get("user"):
        user = _named(kubeconfig["users"], ctx["user"])
        result["users"].append({"name": user["name"], "user": _absolute(user.get("user"), USER_FILES, base_dir)})
    return result
