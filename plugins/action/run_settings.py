# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Action plugin fairgpu.tenancy.run_settings: the run's settings of one inventory host, decided once, on the
controller (documentation: plugins/modules/run_settings.py).

One call of ``plan/resolve.py``'s ``run_settings`` with the role's variables, the pinned versions
(files/lab/toolchain/versions.env) and this machine's ephemeral port range; for the playbooks that follow what
``site.yml`` recorded (tenants, validate, replay) the record is read first (kubernetes.core.k8s_info through the
host's own kubeconfig and context), so the resolver runs once with it. Sets the fact ``run_settings``; fails with
every error of the resolver, one a line, before anything changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import yaml
from ansible.plugins.action import ActionBase

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.versions import versions_env
from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import resolve

VERSIONS_ENV = os.path.join(os.path.dirname(__file__), "..", "..", "files", "lab", "toolchain", "versions.env")
EPHEMERAL_PORTS = "/proc/sys/net/ipv4/ip_local_port_range"
ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "roles")

ARGUMENT_SPEC = dict(
    playbook=dict(type="str", required=True, choices=list(resolve.PLAYBOOKS)),
    provider=dict(type="str", default="kwok"),
    cluster_name=dict(type="str", default="fairgpu"),
    kubeconfig=dict(type="str", default=""),
    context=dict(type="str", default=""),
    path=dict(type="str"),
    run_path=dict(type="str", default=""),
    mig_strategy=dict(type="str", default=""),
    local_ports=dict(type="raw", default={}),
    namespaces=dict(type="raw", default={}),
    state_dir=dict(type="str", required=True),
    toolchain_cache=dict(type="str", required=True),
    helm_binary=dict(type="raw", default=""),
    mode_overrides=dict(type="dict", default={}),
    chart_settings=dict(type="dict", default={}),
    host_variables=dict(type="list", elements="str", default=[]),
)


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def unreachable_message(provider, kubeconfig, context, error):
    """Why the cluster's record could not be read: its kubeconfig is missing, or its API server did not answer."""
    if not os.path.isfile(os.path.expanduser(kubeconfig)):
        return "cluster_kubeconfig: %s does not exist%s" % (
            kubeconfig, " (run playbooks/site.yml first to create the embedded cluster)" if provider == "kwok" else "")
    return "cluster_kubeconfig: the API server of %s%s did not answer: %s" % (
        kubeconfig, " (context %s)" % context if context else "", error or "no answer")


def role_settings():
    """(every role's name, every option of every role's meta/argument_specs.yml): the settings of the collection."""
    roles, settings = [], set()
    for path in sorted(glob.glob(os.path.join(ROLES, "*", "meta", "argument_specs.yml"))):
        roles.append(os.path.basename(os.path.dirname(os.path.dirname(path))))
        with open(path) as handle:
            for entry in (yaml.safe_load(handle) or {}).get("argument_specs", {}).values():
                settings.update((entry or {}).get("options") or {})
    return roles, settings


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _validated, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        given = dict(
            cluster=task_vars.get("inventory_hostname", ""), cluster_name=args["cluster_name"],
            requested_path=args["path"], inventory_path=args["run_path"], mig_strategy=args["mig_strategy"],
            local_ports=args["local_ports"], namespaces=args["namespaces"], ephemeral_ports=_read(EPHEMERAL_PORTS),
            state_dir=args["state_dir"], toolchain_cache=args["toolchain_cache"], versions=versions_env(_read(VERSIONS_ENV)),
            host_variables=args["host_variables"], mode_overrides=args["mode_overrides"], helm_binary=args["helm_binary"],
            chart_settings=args["chart_settings"], kubeconfig=args["kubeconfig"], context=args["context"])
        settings = resolve.run_settings(args["playbook"], args["provider"], **given)
        if not settings["errors"] and args["playbook"] in resolve.FOLLOWS_RECORD:
            # tenants.yml, validate.yml and replay.yml follow the path the last site.yml recorded; the read is also
            # their check that the cluster answers.
            read = self._execute_module(module_name="kubernetes.core.k8s_info", task_vars=task_vars, module_args=dict(
                settings["connection"]["auth"], kind="ConfigMap", namespace=resolve.RECORD_NAMESPACE,
                name=resolve.RECORD_NAME))
            if read.get("failed"):
                connection = settings["connection"]
                return dict(result, failed=True, msg=unreachable_message(
                    args["provider"], connection["kubeconfig"], connection["context"], read.get("msg")))
            settings = resolve.run_settings(args["playbook"], args["provider"],
                                            recorded_path=resolve.recorded_path(read.get("resources")), **given)
        if settings["errors"]:
            return dict(result, failed=True, msg="\n".join(settings["errors"]), errors=settings["errors"])
        roles, known = role_settings()
        warnings = resolve.misspelled_settings(args["host_variables"], known, roles)
        return dict(result, changed=False, ansible_facts={"run_settings": settings}, warnings=warnings)
