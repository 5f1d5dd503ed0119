# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""Kueue's admission webhook configurations for a Kueue controller that runs as a local process.

Pure logic, no cluster access. Input: the documents of upstream's ``config/components/webhook/manifests.yaml``
(read from the Kueue Go module at the pinned version by ``files/lab/toolchain/toolchain.sh``). Output: the same
webhooks as Kueue's kustomize/Helm install produces, with two differences only:

- every ``clientConfig`` is ``{url: https://<host>:<port><path>, caBundle}`` instead of a Service
  reference, because the API server of the embedded cluster reaches Kueue on loopback (what envtest does);
- the objects are named ``kueue-mutating-webhook-configuration`` / ``kueue-validating-webhook-configuration``
  as the kustomize ``namePrefix: kueue-`` names them.

As upstream's kustomization does, the webhooks of job-like objects (everything outside
``kueue.x-k8s.io``) skip the namespaces ``kube-system`` and ``kueue-system``. ``failurePolicy`` stays
upstream's ``Fail``: while Kueue is down, creating a Job elsewhere is refused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import MANAGED_BY_LABEL

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
SKIPPED_NAMESPACES = ["kube-system", "kueue-system"]


class KueueWebhookError(ValueError):
    """Raised when the upstream manifests do not have the expected shape."""


def _is_kueue_api(webhook):
    groups = {group for rule in webhook.get("rules", []) for group in rule.get("apiGroups", [])}
    return groups == {"kueue.x-k8s.io"}


def local_webhook_configurations(documents, host, port, ca_bundle):
    """Return the two webhook configurations (dicts) pointed at ``https://host:port``.

    ``documents``: parsed YAML documents (None entries are ignored); ``ca_bundle``: base64 PEM of the CA that
    signed Kueue's serving certificate. Raises KueueWebhookError if a configuration is missing or a webhook has
    no ``clientConfig.service.path``.
    """
    result = []
    for kind in KINDS:
        found = [d for d in documents if isinstance(d, dict) and d.get("kind") == kind]
        if len(found) != 1:
            raise KueueWebhookError("expected one %s in Kueue's webhook manifests, found %d" % (kind, len(found)))
        config = copy.deepcopy(found[0])
        config["metadata"] = {
            "name": "kueue-" + config["metadata"]["name"],
            "labels": {"app.kubernetes.io/name": "kueue", MANAGED_BY_LABEL: "fairgpu"},
        }
        for webhook in config.get("webhooks", []):
            path = (webhook.get("clientConfig") or {}).get("service", {}).get("path")
            if not path:
                raise KueueWebhookError("webhook %s has no clientConfig.service.path" % webhook.get("name"))
            webhook["clientConfig"] = {"url": "https://%s:%d%s" % (host, int(port), path), "caBundle": ca_bundle}
            if not _is_kueue_api(webhook):
                webhook["namespaceSelector"] = {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(SKIPPED_NAMESPACES),
                }]}
        result.append(config)
    return result
