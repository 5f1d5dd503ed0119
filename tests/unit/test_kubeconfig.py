"""The kubeconfig of fairgpu's local processes (plugins/module_utils/cluster/kubeconfig.py): only the inventory
host's context, since the local Kueue reads its file's current context and has no --context."""

import os

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster.kubeconfig import (
    KubeconfigError,
    context_errors,
    single_context,
)

# Two clusters in one file, the current context the other one (a person's ~/.kube/config with several clusters).
CONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "decoy",
    "clusters": [{"name": "decoy", "cluster": {"server": "https://127.0.0.1:1111", "certificate-authority": "pki/ca.crt"}},
                 {"name": "target", "cluster": {"server": "https://127.0.0.1:2222", "certificate-authority": "pki/ca.crt"}}],
    "users": [{"name": "decoy-admin", "user": {"token": "decoy"}},
              {"name": "target-admin", "user": {"client-certificate": "pki/admin.crt", "client-key": "/abs/admin.key"}}],
    "contexts": [{"name": "decoy", "context": {"cluster": "decoy", "user": "decoy-admin"}},
                 {"name": "platform-admin@target", "context": {"cluster": "target", "user": "target-admin",
                                                               "namespace": "ops"}}],
}


def test_only_the_chosen_context_and_it_current():
    single = single_context(CONFIG, "platform-admin@target", "/home/ops/.kube/clusters.yaml")
    assert single["current-context"] == "platform-admin@target"
    assert [c["name"] for c in single["contexts"]] == ["platform-admin@target"]
    assert single["contexts"][0]["context"] == {"cluster": "target", "user": "target-admin", "namespace": "ops"}
    assert single["clusters"] == [{"name": "target", "cluster": {"server": "https://127.0.0.1:2222",
                                                                 "certificate-authority": "/home/ops/.kube/pki/ca.crt"}}]
    # Relative paths resolve against the original file's directory (clientcmd's ResolveLocalPaths), absolute stay.
    assert single["users"] == [{"name": "target-admin", "user": {"client-certificate": "/home/ops/.kube/pki/admin.crt",
                                                                 "client-key": "/abs/admin.key"}}]
    assert "decoy" not in repr(single)
    # The input is not changed.
    assert CONFIG["clusters"][1]["cluster"]["certificate-authority"] == "pki/ca.crt"


def test_no_context_given_takes_the_files_current_one():
    single = single_context(CONFIG, "", "kube.yaml")
    assert single["current-context"] == "decoy" and single["users"][0]["user"] == {"token": "decoy"}
    assert single["clusters"][0]["cluster"]["certificate-authority"] == os.path.join(os.getcwd(), "pki/ca.crt")


@pytest.mark.parametrize("config,context,message", [
    (CONFIG, "prod", "cluster_context: /k.yaml has no context 'prod'; set cluster_context to one of decoy, "
                     "platform-admin@target"),
    (dict(CONFIG, **{"current-context": ""}), "",
     "cluster_context: /k.yaml has no current-context; set cluster_context to one of decoy, platform-admin@target"),
    (dict(CONFIG, **{"current-context": "gone"}), "",
     "cluster_kubeconfig: /k.yaml has no context 'gone'; set cluster_context to one of decoy, platform-admin@target"),
    (dict(CONFIG, clusters=[]), "decoy", "cluster_context: context 'decoy' of /k.yaml names cluster 'decoy', "
                                         "which the file does not define"),
    (dict(CONFIG, users=[]), "decoy", "cluster_context: context 'decoy' of /k.yaml names user 'decoy-admin', which "
                                      "the file does not define"),
    ({}, "", "cluster_kubeconfig: /k.yaml holds no contexts; give the path of a kubeconfig that reaches the cluster"),
    (None, "x", "cluster_kubeconfig: /k.yaml holds no contexts; give the path of a kubeconfig that reaches the "
                "cluster"),
])
def test_a_context_the_file_does_not_hold_is_named_with_the_fix(config, context, message):
    assert context_errors(config, context, "/k.yaml") == [message]
    with pytest.raises(KubeconfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        single_context(config, context, "/k.yaml")


def test_a_context_without_a_user():
    config = dict(CONFIG, contexts=[{"name": "anon", "context": {"cluster": "target"}}])
    assert context_errors(config, "anon") == []
    assert single_context(config, "anon")["users"] == []
