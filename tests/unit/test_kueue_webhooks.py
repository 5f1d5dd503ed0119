import json
import os
import subprocess

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.webhooks import (
    KueueWebhookError,
    local_webhook_configurations,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def webhook(name, group, path):
    return {"name": name, "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "failurePolicy": "Fail", "rules": [{"apiGroups": [group], "resources": ["x"]}]}


DOCS = [
    {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "mutating-webhook-configuration"},
     "webhooks": [webhook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                  webhook("mclusterqueue.kb.io", "kueue.x-k8s.io", "/mutate-cq")]},
    None,
    {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "validating-webhook-configuration"},
     "webhooks": [webhook("vjob.kb.io", "batch", "/validate-batch-v1-job")]},
]


def test_urls_names_and_namespace_selectors():
    mutating, validating = local_webhook_configurations(DOCS, "127.0.0.1", 19443, "Q0E=")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    job, cq = mutating["webhooks"]
    assert job["clientConfig"] == {"url": "https://127.0.0.1:19443/mutate-batch-v1-job", "caBundle": "Q0E="}
    assert job["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
    assert "namespaceSelector" not in cq
    assert job["failurePolicy"] == "Fail"
    assert validating["webhooks"][0]["clientConfig"]["url"].endswith("/validate-batch-v1-job")
    assert DOCS[0]["webhooks"][0]["clientConfig"]["service"]["name"] == "webhook-service", "input not modified"


def test_missing_configuration_is_reported():
    with pytest.raises(KueueWebhookError, match="expected one ValidatingWebhookConfiguration"):
        local_webhook_configurations(DOCS[:1], "127.0.0.1", 1, "x")


def test_upstream_manifests_of_the_pinned_kueue():
    """The real config/components/webhook/manifests.yaml of the pinned Kueue (from the toolchain cache)."""
    out = subprocess.run(["bash", os.path.join(ROOT, "files/lab/toolchain/toolchain.sh"), "manifest", "kueue"],
                         check=False, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("Kueue is not built yet (make toolchain)")
    with open(os.path.join(json.loads(out.stdout)["kueue_manifests"], "webhook.yaml")) as handle:
        docs = list(yaml.safe_load_all(handle))
    mutating, validating = local_webhook_configurations(docs, "127.0.0.1", 19443, "x")
    paths = {w["clientConfig"]["url"].split(":19443")[1] for c in (mutating, validating) for w in c["webhooks"]}
    assert {"/mutate-batch-v1-job", "/validate-batch-v1-job", "/validate-kueue-x-k8s-io-v1beta2-workload"} <= paths
    job = next(w for w in mutating["webhooks"] if w["name"] == "mjob.kb.io")
    assert job["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
