"""The drift check's compare logic (issue 25, "Drift that tells the truth"): Kueue's Configuration compared parsed,
by meaning (key order, duration spelling and Kueue's defaults are no drift, a removed fairSharing is); API objects in
the fields fairgpu sets only; the GPU Operator's ClusterPolicy in the fields fairgpu's chart values set only."""

import copy

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.cluster import gpu_operator_values
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import drift
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import configuration

# fairgpu's local-mode Configuration as roles/kueue/vars/main.yml composes it (ports of tests/integration/vars.yml).
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
    "manageJobsWithoutQueueName": False, "integrations": {"frameworks": ["batch/job"]},
    "metrics": {"enableClusterQueueResources": True, "bindAddress": "127.0.0.1:28443"},
    "waitForPodsReady": {"timeout": "10m", "recoveryTimeout": "10m", "blockAdmission": False,
                         "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 3,
                                               "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600}},
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    "health": {"healthProbeBindAddress": "127.0.0.1:28081"},
    "webhook": {"host": "127.0.0.1", "port": 29443, "certDir": "/state/kueue/certs"},
    "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
}
WHERE = "/state/kueue/config.yaml"


def paths(found):
    return sorted(one["path"] for one in found)


def test_the_same_configuration_written_in_another_key_order_is_no_drift():
    text = yaml.safe_dump(CONFIG, sort_keys=True)
    reordered = yaml.safe_dump(dict(reversed(list(CONFIG.items()))), sort_keys=False)
    assert text != reordered
    assert configuration.configuration_differences(text, CONFIG, WHERE) == []
    assert configuration.configuration_differences(reordered, CONFIG, WHERE) == []


def test_keys_at_kuees_defaults_and_respelled_durations_are_no_drift():
    live = copy.deepcopy(CONFIG)
    live["waitForPodsReady"]["timeout"] = "10m0s"
    live["waitForPodsReady"]["recoveryTimeout"] = "600s"
    live["clientConnection"] = {"qps": 1000, "burst": 1000}  # Kueue's defaults, written out
    live["metrics"]["enableClusterQueueResources"] = True
    live["fairSharing"] = {}  # the strategies left to their default: the same two, in that order
    assert configuration.configuration_differences(yaml.safe_dump(live), CONFIG, WHERE) == []
    # A section of defaults only on fairgpu's side (integrations: batch/job) against none on the live side.
    desired = dict(CONFIG)
    live = dict((k, v) for k, v in CONFIG.items() if k != "integrations")
    assert configuration.configuration_differences(yaml.safe_dump(live), desired, WHERE) == []


def test_a_removed_fair_sharing_section_is_drift():
    live = dict((k, v) for k, v in CONFIG.items() if k != "fairSharing")
    found = configuration.configuration_differences(yaml.safe_dump(live), CONFIG, WHERE)
    assert found == [{"object": WHERE, "path": "fairSharing", "live": None, "absent": "live",
                      "fairgpu": CONFIG["fairSharing"]}]
    assert drift.difference_lines(found) == [
        WHERE + " fairSharing: live (absent), fairgpu "
        '{"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}']
    # And the other way: fair sharing switched on by hand where fairgpu leaves it off (kueue_fair_sharing false).
    found = configuration.configuration_differences(yaml.safe_dump(CONFIG), live, WHERE)
    assert paths(found) == ["fairSharing"] and found[0]["absent"] == "fairgpu"


def test_changed_values_extra_keys_and_reordered_lists_are_drift():
    live = copy.deepcopy(CONFIG)
    live["fairSharing"]["preemptionStrategies"].reverse()  # Kueue tries them in order
    live["waitForPodsReady"]["timeout"] = "30m"
    live["integrations"]["frameworks"].append("kubeflow.org/pytorchjob")
    live["manageJobsWithoutQueueName"] = True
    live["queueVisibility"] = {"updateIntervalSeconds": 5}  # a key fairgpu does not write and Kueue has no default for
    found = configuration.configuration_differences(yaml.safe_dump(live), CONFIG, WHERE)
    assert paths(found) == ["fairSharing.preemptionStrategies[0]", "fairSharing.preemptionStrategies[1]",
                            "integrations.frameworks", "manageJobsWithoutQueueName", "queueVisibility",
                            "waitForPodsReady.timeout"]
    timeout = [one for one in found if one["path"] == "waitForPodsReady.timeout"][0]
    assert (timeout["live"], timeout["fairgpu"]) == ("30m", "10m")


def test_a_missing_or_unreadable_configuration_is_one_difference():
    assert configuration.configuration_differences(None, CONFIG, WHERE)[0]["path"] == ""
    found = configuration.configuration_differences("fairSharing: [unclosed", CONFIG, WHERE)
    assert len(found) == 1 and found[0]["live"].startswith("(unreadable: not YAML")
    found = configuration.configuration_differences("kind: ConfigMap\n", CONFIG, WHERE)
    assert "kind 'ConfigMap', not Configuration" in found[0]["live"]


@pytest.mark.parametrize("live, desired, same", [
    (8, "8", True), ("8", 8, True), ("1Gi", "1024Mi", True), ("500m", 0.5, True), ("8", "9", False),
    ("10m", "600s", True), ("1h30m", "90m", True), ("10m", "11m", False), (True, "true", False), (1, True, False),
    ("team-a", "team-a", True), ("team-a", "team-b", False), (None, None, True), (None, 0, False),
])
def test_scalars_compare_by_meaning(live, desired, same):
    assert drift.same_scalar(live, desired) is same


class _TaggedStr(str):
    """What Ansible 2.19 hands a filter for a templated string: a str subclass."""


def test_a_string_of_a_str_subclass_is_the_same_string():
    """Found on the embedded cluster: every templated string of fairgpu's Configuration was drift."""
    assert drift.same_scalar("kueue-system", _TaggedStr("kueue-system"))
    assert configuration.configuration_differences(
        yaml.safe_dump(CONFIG), dict(CONFIG, namespace=_TaggedStr("kueue-system")), WHERE) == []


CLUSTER_QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                 "metadata": {"name": "team-a", "labels": {"app.kubernetes.io/managed-by": "fairgpu"}},
                 "spec": {"cohortName": "gpus", "namespaceSelector": {}, "fairSharing": {"weight": "1"},
                          "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                              {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8,
                                                             "borrowingLimit": None}]}]}]}}


def live_cluster_queue():
    """The ClusterQueue as the API server returns it: defaults, status, managedFields, more labels, quantities as
    strings, the null field gone."""
    live = copy.deepcopy(CLUSTER_QUEUE)
    live["metadata"].update({"resourceVersion": "41", "generation": 2, "uid": "u",
                             "managedFields": [{"manager": "fairgpu", "operation": "Apply"}]})
    live["metadata"]["labels"]["team"] = "platform"
    live["spec"].update({"queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
                         "flavorFungibility": {"whenCanBorrow": "MayStopSearch"}})
    resource = live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    resource["nominalQuota"] = "8"
    del resource["borrowingLimit"]
    live["status"] = {"conditions": [{"type": "Active", "status": "True"}]}
    return live


def test_an_object_with_only_defaults_status_and_other_fields_added_has_no_drift():
    assert drift.object_differences(live_cluster_queue(), CLUSTER_QUEUE) == []


def test_a_quota_another_field_manager_changed_is_drift_with_its_path():
    live = live_cluster_queue()
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2"
    live["spec"]["cohortName"] = "elsewhere"
    found = drift.object_differences(live, CLUSTER_QUEUE)
    assert drift.difference_lines(found) == [
        'ClusterQueue/team-a spec.cohortName: live "elsewhere", fairgpu "gpus"',
        'ClusterQueue/team-a spec.resourceGroups[0].flavors[name=gpu].resources[name=nvidia.com/gpu].nominalQuota: '
        'live "2", fairgpu 8']


def test_a_named_item_matched_by_name_whatever_its_position():
    desired = {"kind": "ClusterPolicy", "metadata": {"name": "p"}, "spec": {"toolkit": {"env": [
        {"name": "A", "value": "false"}, {"name": "B", "value": "false"}]}}}
    live = {"kind": "ClusterPolicy", "metadata": {"name": "p"}, "spec": {"toolkit": {"env": [
        {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
        {"name": "B", "value": "false"}, {"name": "A", "value": "true"}]}}}
    found = drift.object_differences(live, desired)
    assert [(one["path"], one["live"], one["fairgpu"]) for one in found] == [
        ("spec.toolkit.env[name=A].value", "true", "false")]
    live["spec"]["toolkit"]["env"] = [{"name": "B", "value": "false"}]
    assert drift.object_differences(live, desired)[0]["path"] == "spec.toolkit.env[name=A]"


def test_a_missing_label_and_a_secret_value_are_drift_but_secret_values_are_never_shown():
    live = live_cluster_queue()
    del live["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert paths(drift.object_differences(live, CLUSTER_QUEUE)) == ["metadata.labels.app.kubernetes.io/managed-by"]
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "m"},
              "data": {"token": "c2VjcmV0"}}
    found = drift.object_differences({"data": {"token": "b3RoZXI="}}, secret)
    assert found[0]["object"] == "Secret/m/s" and (found[0]["live"], found[0]["fairgpu"]) == ("(hidden)", "(hidden)")


def test_objects_differences_and_an_absent_object():
    found = drift.objects_differences({"ClusterQueue/team-a": live_cluster_queue()},
                                      [CLUSTER_QUEUE, dict(CLUSTER_QUEUE, metadata={"name": "team-b"})])
    assert found == [{"object": "ClusterQueue/team-b", "path": "", "live": None, "fairgpu": "(the object)",
                      "absent": "live"}]


def test_a_rule_changed_in_a_prometheus_rule_is_drift():
    desired = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
               "metadata": {"name": "fairgpu", "namespace": "monitoring"},
               "spec": {"groups": [{"name": "fairgpu.alerts", "rules": [
                   {"alert": "FairgpuKueueDown", "expr": "up{job=\"kueue\"} == 0", "for": "5m"}]}]}}
    live = copy.deepcopy(desired)
    live["spec"]["groups"][0]["rules"][0]["for"] = "1h"
    found = drift.object_differences(live, desired)
    assert [one["path"] for one in found] == ["spec.groups[name=fairgpu.alerts].rules[0].for"]


# The role's chart values (roles/gpu_operator/vars/main.yml gpu_operator_chart_values, defaults applied).
ROLE_VALUES = {
    "cdi": {"enabled": True},
    "toolkit": {"env": [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
                        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "false"}]},
    "mig": {"strategy": "single"},
    "migManager": {"enabled": True, "config": {"name": "fairgpu-mig-parted-config", "default": "all-disabled"}},
    "dcgmExporter": {"enabled": True},
}


def test_the_cluster_policy_fields_are_only_those_fairgpu_sets():
    helm_values = copy.deepcopy(ROLE_VALUES)
    helm_values["toolkit"]["env"] += [{"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
                                      {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]
    helm_values["driver"] = {"enabled": False}  # an extra value: the platform team's, not compared
    policy = gpu_operator_values.cluster_policy_fields(ROLE_VALUES, helm_values)
    assert policy["metadata"] == {"name": "cluster-policy"} and policy["kind"] == "ClusterPolicy"
    assert sorted(policy["spec"]) == ["cdi", "dcgmExporter", "mig", "migManager", "toolkit"]
    # The entries of the names the role sets, at the value that wins (the later extra one).
    assert policy["spec"]["toolkit"]["env"] == [
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "false"},
        {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"}]
    live = {"spec": {"operator": {"defaultRuntime": "containerd"}, "driver": {"enabled": True},
                     "cdi": {"enabled": True, "default": False}, "mig": {"strategy": "mixed"},
                     "migManager": {"enabled": True, "config": {"name": "fairgpu-mig-parted-config",
                                                                "default": "all-disabled"}},
                     "dcgmExporter": {"enabled": True},
                     "toolkit": {"enabled": True, "env": copy.deepcopy(helm_values["toolkit"]["env"])}}}
    found = drift.object_differences(live, policy)
    assert [(one["path"], one["live"], one["fairgpu"]) for one in found] == [("spec.mig.strategy", "mixed", "single")]


class _Found(object):
    def __init__(self, value):
        self.value = value

    def to_dict(self):
        return copy.deepcopy(self.value)


class _Client(object):
    """The calls drift_info makes (kubernetes.core's K8SClient: resource(kind, api_version), get(resource, ...))."""

    def __init__(self, objects, served):
        self.objects, self.served, self.gets = objects, served, []

    def resource(self, kind, api_version):
        from kubernetes.dynamic.exceptions import ResourceNotFoundError
        if kind not in self.served:
            raise ResourceNotFoundError("no %s in %s" % (kind, api_version))
        return kind

    def get(self, resource, name=None, namespace=None):
        from kubernetes.dynamic.exceptions import NotFoundError
        self.gets.append((resource, namespace, name))
        key = "/".join([resource] + ([namespace] if namespace else []) + [name])
        if key not in self.objects:
            class _Answer(object):
                status, reason, body, headers = 404, "Not Found", "{}", {}

                def getheaders(self):
                    return {}
            raise NotFoundError(_Answer())
        return _Found(self.objects[key])


def test_the_drift_info_module_reads_each_object_and_lists_differences(monkeypatch, capsys):
    from ansible_collections.fairgpu.tenancy.plugins.modules import drift_info
    from module_main import run_main
    live = live_cluster_queue()
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1"
    client = _Client({"ClusterQueue/team-a": live}, served=("ClusterQueue",))
    monkeypatch.setattr(drift_info, "get_api_client", lambda module: client)
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
              "spec": {"mig": {"strategy": "single"}}}
    result = run_main(drift_info, {"objects": [CLUSTER_QUEUE, dict(CLUSTER_QUEUE, metadata={"name": "team-b"}),
                                               policy], "_ansible_check_mode": True}, capsys)
    assert not result.get("failed") and result["changed"] is False, result
    assert result["missing"] == ["ClusterQueue/team-b", "ClusterPolicy/cluster-policy"]
    assert result["lines"] == ['ClusterQueue/team-a spec.resourceGroups[0].flavors[name=gpu].resources'
                               '[name=nvidia.com/gpu].nominalQuota: live "1", fairgpu 8']
    assert client.gets == [("ClusterQueue", None, "team-a"), ("ClusterQueue", None, "team-b")]
    result = run_main(drift_info, {"objects": [{"kind": "ClusterQueue", "metadata": {"name": "x"}}]}, capsys)
    assert result["failed"] and "every object needs apiVersion, kind and metadata.name" in result["msg"]
