# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The objects the roles apply, as a kustomize tree for ``kubectl apply -k`` and GitOps (Argo CD, Flux).

Pure logic, no cluster access, no file writes (``playbooks/render.yml`` writes). The objects come from the same
builders the roles use (``tenant_plan`` / ``kueue_objects``); this module only lays them out:

    kustomization.yaml              resources: base, then one directory per tenant
    base/                           cluster-wide objects: admission policies, WorkloadPriorityClasses, Cohort,
                                    ResourceFlavors, ClusterQueues; the MIG manager's ConfigMap (path mig)
    tenants/<tenant>/               the tenant's Namespaces, LocalQueues, ResourceQuotas, LimitRanges, Roles,
                                    RoleBindings
    kueue/                          Kueue's Configuration as the ConfigMap ``kueue-manager-config`` that an
                                    in-cluster Kueue reads; applied with Kueue itself, before the rest
    monitoring/                     ServiceMonitors, PrometheusRule and the Grafana dashboard ConfigMap, for a
                                    cluster with kube-prometheus-stack; applied after its CRDs

Every file holds one object, keys sorted, so the same input gives the same bytes and a second render is no diff.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import TENANT_LABEL

HEADER = "# Rendered by fairgpu (playbooks/render.yml) from the inventory; edit the inventory, not this file.\n"
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"


def _represent_str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


@functools.lru_cache(maxsize=None)
def _dumper():
    """PyYAML's SafeDumper that writes multi-line strings (an embedded config file) as literal blocks."""

    class Dumper(pyyaml.require().SafeDumper):
        pass

    Dumper.add_representer(str, _represent_str)
    return Dumper


def _yaml(data):
    return pyyaml.require().dump(data, Dumper=_dumper(), sort_keys=True, default_flow_style=False, width=120)


def to_yaml(data):
    """JSON-shaped ``data`` as YAML: block style, keys sorted, multi-line strings as literal blocks. Takes the
    dict and str subclasses Ansible hands to filters."""
    return _yaml(json.loads(json.dumps(data)))


def dump(obj):
    """One object as YAML, the header comment first."""
    return HEADER + to_yaml(obj)


def _file_name(obj):
    return "%s-%s.yaml" % (obj["kind"].lower(), obj["metadata"]["name"])


def _kustomization(resources, comment):
    return "%s# %s\n%s" % (HEADER, comment, _yaml(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources}))


def kustomize_tree(objects, kueue_configuration=None, kueue_namespace="kueue-system", monitoring_objects=None):
    """Lay ``objects`` (manifest dicts as the roles apply them) out as a kustomize tree.

    A namespaced object goes to the directory of the tenant that owns its namespace (the Namespace's
    ``fairgpu.io/tenant`` label); cluster-scoped objects and those of platform namespaces (the MIG manager's
    ConfigMap in the GPU Operator's namespace) go to ``base/``. ``kueue_configuration``: Kueue's
    ``config.kueue.x-k8s.io`` Configuration dict for an in-cluster Kueue (None: no ``kueue/`` directory);
    ``monitoring_objects``: the monitoring role's objects for the Prometheus Operator (None or []: no
    ``monitoring/`` directory). Returns ``{relative path: file text}``.
    """
    owners = {o["metadata"]["name"]: o["metadata"]["labels"][TENANT_LABEL]
              for o in objects if o["kind"] == "Namespace"}
    tree, dirs = {}, {"base": []}
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        tenant = owners.get(namespace or obj["metadata"]["name"]) if obj["kind"] == "Namespace" or namespace else None
        directory = "tenants/" + tenant if tenant else "base"
        name = ("%s-" % namespace if namespace else "") + _file_name(obj)
        dirs.setdefault(directory, []).append(name)
        tree["%s/%s" % (directory, name)] = dump(obj)
    for directory, names in dirs.items():
        what = "cluster-wide objects" if directory == "base" else "tenant %s" % directory.split("/", 1)[1]
        tree[directory + "/kustomization.yaml"] = _kustomization(sorted(names), what)
    tree["kustomization.yaml"] = _kustomization(
        ["base"] + sorted(d for d in dirs if d != "base"),
        "Apply after Kueue (kueue/ and Kueue's own manifests): kubectl apply -k <this directory>")
    if kueue_configuration is not None:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": KUEUE_CONFIG_MAP, "namespace": kueue_namespace},
                      "data": {KUEUE_CONFIG_KEY: to_yaml(kueue_configuration)}}
        tree["kueue/" + _file_name(config_map)] = dump(config_map)
        tree["kueue/kustomization.yaml"] = _kustomization(
            [_file_name(config_map)], "Kueue's configuration: apply with Kueue's own manifests, first")
    if monitoring_objects:
        names = []
        for obj in monitoring_objects:
            namespace = obj["metadata"].get("namespace")
            names.append(("%s-" % namespace if namespace else "") + _file_name(obj))
            tree["monitoring/" + names[-1]] = dump(obj)
        tree["monitoring/kustomization.yaml"] = _kustomization(
            sorted(names), "Monitoring for a cluster with kube-prometheus-stack: apply after its CRDs")
    return tree
