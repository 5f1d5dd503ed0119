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
    kueue/                          no object of its own: a kustomize Component for Kueue's released manifests
                                    (it patches their ConfigMap ``kueue-manager-config`` with fairgpu's
                                    Configuration and their Deployment ``kueue-controller-manager`` with the
                                    feature gates and a checksum annotation that rolls it when either changes),
                                    and ``values.yaml``, the same for Kueue's chart (an Argo CD app of Kueue)
    monitoring/                     ServiceMonitors, PrometheusRule and the Grafana dashboard ConfigMap, for a
                                    cluster with kube-prometheus-stack; applied after its CRDs

Ownership (one owner per object): the tree owns fairgpu's objects only. Kueue's objects belong to whoever installs
Kueue (its manifests in the platform team's Kustomization, or their Argo CD app of the chart); fairgpu's ``kueue/``
is applied through that owner, as a Component of the Kustomization or as the app's values file, never as objects of
its own, so no two applications write the same object.

Every file holds one object (or one patch), keys sorted, so the same input gives the same bytes and a second render is no diff.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import json

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import pyyaml
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import TENANT_LABEL
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import settings as kueue_settings

HEADER = "# Rendered by fairgpu (playbooks/render.yml) from the inventory; edit the inventory, not this file.\n"
# The names in Kueue's released manifests (config/default: namespace kueue-system, namePrefix kueue-;
# config/components/manager: configMapGenerator manager-config without hash suffix, Deployment controller-manager
# with the one container manager).
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_CONTAINER = "manager"


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


def _json_pointer(key):
    return key.replace("~", "~0").replace("/", "~1")


def kueue_component(configuration, feature_gates=None, namespace="kueue-system", chart_values=None):
    """The ``kueue/`` directory: ``{file name: text}``. A kustomize Component (``kind: Component``) with two patches
    for Kueue's released manifests: a strategic merge patch that sets ``controller_manager_config.yaml`` of the
    ConfigMap ``kueue-manager-config`` to ``configuration``, and a JSON patch of the Deployment
    ``kueue-controller-manager`` that checks its first container is ``manager``, adds the pod template annotation
    ``settings.CHECKSUM_ANNOTATION`` (so a changed Configuration or gate rolls the Deployment: Kueue reads both only
    at start) and, with ``feature_gates``, appends ``--feature-gates`` to the container's args (appended: replacing
    ``args`` would drop ``--config``, kubernetes-sigs/kueue#1427). ``chart_values`` (None: no file): the chart values
    carrying the same, as ``values.yaml`` for a Kueue installed from its chart."""
    gates = dict(feature_gates or {})
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": KUEUE_CONFIG_MAP, "namespace": namespace},
                  "data": {KUEUE_CONFIG_KEY: to_yaml(configuration)}}
    ops = [{"op": "test", "path": "/spec/template/spec/containers/0/name", "value": KUEUE_CONTAINER},
           {"op": "add", "path": "/spec/template/metadata/annotations/" + _json_pointer(kueue_settings.CHECKSUM_ANNOTATION),
            "value": kueue_settings.checksum(configuration, gates)}]
    if gates:
        ops.append({"op": "add", "path": "/spec/template/spec/containers/0/args/-",
                    "value": "--feature-gates=" + kueue_settings.feature_gates_arg(gates)})
    config_file = "configmap-%s.yaml" % KUEUE_CONFIG_MAP
    deployment_file = "deployment-%s.yaml" % KUEUE_DEPLOYMENT
    component = {"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component", "patches": [
        {"path": config_file},
        {"path": deployment_file, "target": {"group": "apps", "version": "v1", "kind": "Deployment",
                                             "name": KUEUE_DEPLOYMENT, "namespace": namespace}}]}
    comment = ("Kueue's Configuration and feature gates as a Component of the Kustomization that installs Kueue's "
               "released manifests (components: [<this directory>]); for Kueue's chart use values.yaml")
    files = {
        config_file: dump(config_map),
        deployment_file: HEADER + to_yaml(ops),
        "kustomization.yaml": "%s# %s\n%s" % (HEADER, comment, _yaml(component)),
    }
    if chart_values is not None:
        files["values.yaml"] = HEADER + "# Kueue's chart values: the values file of the release or Argo CD app that " \
                                        "owns Kueue\n" + to_yaml(chart_values)
    return files


def kustomize_tree(objects, kueue=None, monitoring_objects=None):
    """Lay ``objects`` (manifest dicts as the roles apply them) out as a kustomize tree.

    A namespaced object goes to the directory of the tenant that owns its namespace (the Namespace's
    ``fairgpu.io/tenant`` label); cluster-scoped objects and those of platform namespaces (the MIG manager's
    ConfigMap in the GPU Operator's namespace) go to ``base/``. ``kueue``: an in-cluster Kueue's
    ``{"configuration": config.kueue.x-k8s.io Configuration dict, "namespace": str (default kueue-system),
    "feature_gates": name -> bool, "chart_values": dict}`` (see ``kueue_component``; None: no ``kueue/``
    directory); ``monitoring_objects``: the monitoring role's objects for the Prometheus Operator (None or []: no
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
        "fairgpu's objects; apply after Kueue (installed with kueue/): kubectl apply -k <this directory>")
    if kueue is not None:
        for name, text in kueue_component(kueue["configuration"], kueue.get("feature_gates"),
                                          kueue.get("namespace") or "kueue-system", kueue.get("chart_values")).items():
            tree["kueue/" + name] = text
    if monitoring_objects:
        names = []
        for obj in monitoring_objects:
            namespace = obj["metadata"].get("namespace")
            names.append(("%s-" % namespace if namespace else "") + _file_name(obj))
            tree["monitoring/" + names[-1]] = dump(obj)
        tree["monitoring/kustomization.yaml"] = _kustomization(
            sorted(names), "Monitoring for a cluster with kube-prometheus-stack: apply after its CRDs")
    return tree
