# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Kueue's controller Configuration (``config.kueue.x-k8s.io/v1beta2``) as Kueue reads it, for the drift check: the
live document (the local process's file, or the chart's ConfigMap key ``controller_manager_config.yaml``) parsed and
compared with fairgpu's, by meaning. Pure logic, no cluster access.

Kueue reads the file once, at start (cmd/kueue/main.go ``apply`` of the ``--config`` file), decodes it strictly and
fills what is absent with ``SetDefaults_Configuration`` (kubernetes-sigs/kueue ``apis/config/v1beta2/defaults.go``,
the v0.19 line). ``DEFAULTS`` are those defaults, by dotted path: a key absent on one side whose value is its default
is no drift. ``fairSharing`` has none: fair sharing is on exactly when the section is there
(``pkg/scheduler/preemption/fairsharing/strategy.go``, ``Enabled`` is ``fairSharing != nil``), so a removed section
is drift, while its ``preemptionStrategies`` default to ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``
(``apis/config/v1beta2/configuration_types.go``, FairSharing.PreemptionStrategies).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.pyyaml import require as require_yaml

# apis/config/v1beta2/defaults.go (constants and SetDefaults_Configuration). A section whose absence means the same
# as an empty one has the default {} (its keys then have their own defaults); leaderElection's durations are
# component-base's RecommendedDefaultLeaderElectionConfiguration (15s, 10s, 2s; leaderElect true).
DEFAULTS = {
    "manageJobsWithoutQueueName": False,
    "webhook": {},
    "webhook.port": 9443,
    "webhook.certDir": "/tmp/k8s-webhook-server/serving-certs",
    "metrics": {},
    "metrics.bindAddress": ":8443",
    "metrics.enableClusterQueueResources": False,
    "health": {},
    "health.healthProbeBindAddress": ":8081",
    "leaderElection": {},
    "leaderElection.leaderElect": True,
    "leaderElection.resourceName": "c1f6bfd2.kueue.x-k8s.io",
    "leaderElection.resourceLock": "leases",
    "leaderElection.leaseDuration": "15s",
    "leaderElection.renewDeadline": "10s",
    "leaderElection.retryPeriod": "2s",
    "internalCertManagement": {},
    "internalCertManagement.enable": True,
    "clientConnection": {},
    "clientConnection.qps": 1000,
    "clientConnection.burst": 1000,
    "integrations": {},
    "integrations.frameworks": ["batch/job"],
    "waitForPodsReady": {},
    "waitForPodsReady.timeout": "30m",
    "waitForPodsReady.blockAdmission": False,
    "waitForPodsReady.requeuingStrategy": {},
    "waitForPodsReady.requeuingStrategy.timestamp": "Eviction",
    "waitForPodsReady.requeuingStrategy.backoffBaseSeconds": 60,
    "waitForPodsReady.requeuingStrategy.backoffMaxSeconds": 3600,
    "fairSharing.preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
}


def parse_configuration(text):
    """The Configuration of YAML ``text`` (a dict), or raises ValueError saying why it is none (not YAML, not a
    mapping, another kind)."""
    yaml = require_yaml()
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError("not YAML: %s" % str(exc).replace("\n", " "))
    if not isinstance(document, dict):
        raise ValueError("not a mapping")
    if document.get("kind") not in (None, "Configuration"):
        raise ValueError("kind %r, not Configuration" % document.get("kind"))
    return document


def configuration_differences(live_text, desired, where):
    """The differences (plugins/module_utils/common/drift.py) between Kueue's live Configuration ``live_text``
    (YAML text; None when there is none) and fairgpu's ``desired`` (a dict), each with ``object`` ``where`` (the
    file, or ``ConfigMap/<namespace>/<name> controller_manager_config.yaml``). No Configuration, or one that does not
    parse, is one difference at path ``""``. Key order, spelling of durations and keys left at their defaults are
    not drift."""
    if live_text is None:
        found = [{"path": "", "live": None, "fairgpu": "(the Configuration)", "absent": "live"}]
    else:
        try:
            live = parse_configuration(live_text)
        except ValueError as exc:
            found = [{"path": "", "live": "(unreadable: %s)" % exc, "fairgpu": "(the Configuration)", "absent": None}]
        else:
            found = drift.document_differences(live, desired, DEFAULTS)
    for one in found:
        one["object"] = where
    return found
