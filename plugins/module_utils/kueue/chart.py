# -*- coding: utf-8 -*-
# Copyright: fairgpu contributors
# Apache License 2.0 (see LICENSE)
"""The values fairgpu gives Kueue's own Helm chart (``charts/kueue`` of sigs.k8s.io/kueue, the chart published as
``oci://registry.k8s.io/kueue/charts/kueue``), and where a chart reference points. Pure logic, no cluster access.

What the chart does with them (kueue v0.19.2, read from ``charts/kueue``):

- ``templates/_helpers.tpl`` ``kueue.fullname``: ``fullnameOverride``, else the release name when it contains the
  chart name (``nameOverride`` or ``kueue``), else ``<release>-<name>``; cut to 63 characters, no trailing ``-``.
  Every object is named after it: Deployment ``<fullname>-controller-manager``, ConfigMap
  ``<fullname>-manager-config``, webhook Service ``<fullname>-webhook-service``, Secret
  ``<fullname>-webhook-server-cert``, metrics Service ``<fullname>-controller-manager-metrics-service``.
- ``templates/manager/manager-config.yaml`` parses ``managerConfig.controllerManagerConfigYaml`` and writes it back
  (``toYaml``) as the ConfigMap's ``controller_manager_config.yaml``, adding ``internalCertManagement`` with the
  fullname's Service and Secret names only when the Configuration has none. fairgpu's Configuration enables
  internal certificate management itself, so it must name them too: otherwise Kueue falls back to its built-in
  ``kueue-webhook-service`` / ``kueue-webhook-server-cert``, which exist only for the release name ``kueue`` (the
  controller then never gets a certificate and crash-loops: kubernetes-sigs/kueue#6797, fixed in the chart by
  kubernetes-sigs/kueue#6869 for a Configuration without the section).
- ``values.yaml`` in the module names the staging image ``us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue``
  with tag ``release-0.19`` and ``pullPolicy: Always``; ``hack/helm-chart-package.sh`` rewrites them to
  ``registry.k8s.io/kueue/kueue``, the release tag and ``IfNotPresent`` only when it packages the published chart.
  A chart taken from the module (or from a source checkout) therefore needs the image given: fairgpu always gives
  the release image of the Kueue version it pins, whatever the chart reference.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import settings

CHART_NAME = "kueue"
# hack/helm-chart-package.sh: the registry of promoted (released) Kueue images.
RELEASE_IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"
_RELEASE_VERSION = re.compile(r"^v?\d+\.\d+\.\d+$")
_REMOTE = re.compile(r"^(oci|https?)://")


def fullname(release_name, name_override="", fullname_override=""):
    """The chart's ``kueue.fullname`` for a release (see the module docstring)."""
    if fullname_override:
        return str(fullname_override)[:63].rstrip("-")
    name = name_override or CHART_NAME
    if name in release_name:
        return str(release_name)[:63].rstrip("-")
    return ("%s-%s" % (release_name, name))[:63].rstrip("-")


def object_names(release_name, values=None):
    """The names of the objects the chart creates for ``release_name`` (``values``: the release's values, for
    ``nameOverride`` / ``fullnameOverride``)."""
    values = values or {}
    full = fullname(release_name, values.get("nameOverride") or "", values.get("fullnameOverride") or "")
    return {
        "fullname": full,
        "deployment": full + "-controller-manager",
        "service_account": full + "-controller-manager",
        "config_map": full + "-manager-config",
        "webhook_service": full + "-webhook-service",
        "webhook_secret": full + "-webhook-server-cert",
        "metrics_service": full + "-controller-manager-metrics-service",
        "mutating_webhook_configuration": full + "-mutating-webhook-configuration",
        "validating_webhook_configuration": full + "-validating-webhook-configuration",
        "manager_cluster_role": full + "-manager-role",
    }


def release_configuration(configuration, release_name, extra_values=None):
    """fairgpu's in-cluster Configuration as the release needs it: with internal certificate management on, the
    webhook Service and Secret are the ones the chart creates for this release. A Configuration with
    ``internalCertManagement.enable: false`` (certificates from cert-manager) is left as it is."""
    config = copy.deepcopy(configuration)
    names = object_names(release_name, extra_values)
    certs = config.setdefault("internalCertManagement", {"enable": True})
    if certs.get("enable", True):
        certs.setdefault("webhookServiceName", names["webhook_service"])
        certs.setdefault("webhookSecretName", names["webhook_secret"])
    return config


def release_image_tag(version):
    """The image tag of a released Kueue version (``v0.19.2`` for ``0.19.2`` or ``v0.19.2``); None for anything
    else (a pre-release or branch build has no image on registry.k8s.io)."""
    version = str(version or "")
    if not _RELEASE_VERSION.match(version):
        return None
    return version if version.startswith("v") else "v" + version


def chart_values(configuration_yaml, version, feature_gates=None):
    """The chart values fairgpu sets: the manager's Configuration (its YAML text), the released controller image of
    ``version`` and, when ``feature_gates`` (name -> bool) has any, ``controllerManager.featureGates``: the list of
    ``{name, enabled}`` that ``templates/_helpers.tpl`` ``kueue.featureGates`` writes into the manager's
    ``--feature-gates`` (plugins/module_utils/kueue/settings.py). No gates: no ``featureGates`` value at all, so a
    release's own list is not replaced by an empty one when values are merged."""
    values = {"managerConfig": {"controllerManagerConfigYaml": configuration_yaml}}
    tag = release_image_tag(version)
    if tag:
        values["controllerManager"] = {"manager": {"image": {
            "repository": RELEASE_IMAGE_REPOSITORY, "tag": tag, "pullPolicy": "IfNotPresent"}}}
    if feature_gates:
        values.setdefault("controllerManager", {})["featureGates"] = settings.chart_feature_gates(feature_gates)
    return values


def chart_ref_kind(ref):
    """``"remote"`` for an ``oci://`` or ``http(s)://`` reference, ``"path"`` for a local chart (a directory or a
    packaged ``.tgz``: an absolute or relative path, ``~/`` included), ``"repository"`` for ``<repo>/<chart>`` of a
    repository added with ``helm repo add``."""
    ref = str(ref or "")
    if _REMOTE.match(ref):
        return "remote"
    if ref.startswith(("/", "./", "../", "~")) or ref.endswith((".tgz", ".tar.gz")) or ref in (".", ".."):
        return "path"
    return "repository"


def chart_ref_errors(ref, exists=None, chart=None, version=None):
    """Messages for ``kueue_chart_ref`` before anything is installed. ``exists``: whether the path exists (for a
    local chart); ``chart``: its Chart.yaml as ``helm show chart`` prints it, parsed (None when not read);
    ``version``: ``kueue_chart_version``. Helm ignores ``--version`` for a local chart, so a chart of another
    version would be installed silently: refused here. [] when fine."""
    errors = []
    if not str(ref or "").strip():
        return ["kueue_chart_ref: empty; give oci://registry.k8s.io/kueue/charts/kueue, a chart directory or a "
                "packaged kueue-<version>.tgz"]
    if chart_ref_kind(ref) != "path":
        return errors
    if exists is False:
        errors.append("kueue_chart_ref: %s does not exist; give the chart directory (charts/kueue of "
                      "sigs.k8s.io/kueue) or the .tgz of `helm pull oci://registry.k8s.io/kueue/charts/kueue "
                      "--version %s`" % (ref, version))
        return errors
    if chart is not None:
        if not isinstance(chart, dict) or chart.get("name") != CHART_NAME:
            errors.append("kueue_chart_ref: %s is not Kueue's chart (its Chart.yaml names %r)"
                          % (ref, chart.get("name") if isinstance(chart, dict) else chart))
        elif version and str(chart.get("version")) != str(version):
            errors.append("kueue_chart_ref: %s is chart version %s, but kueue_chart_version is %s (helm ignores "
                          "--version for a local chart); use the chart of %s or set kueue_version to v%s"
                          % (ref, chart.get("version"), version, version, chart.get("version")))
    return errors
