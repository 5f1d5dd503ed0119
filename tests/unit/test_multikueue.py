"""MultiKueue's building blocks (plugins/module_utils/kueue/multikueue.py, the tenants' objects with
``multikueue``, the kueue role's ``kueue_multikueue``), against Kueue v0.19.2's rules: the v1beta2 shapes of
MultiKueueCluster (``spec.clusterSource.kubeConfig``), AdmissionCheck and the ClusterQueue's
``admissionChecksStrategy``; the kubeconfig forms Kueue refuses (multikueuecluster.go validateKubeConfig); the
dispatcher names it runs (configuration_types.go); the manager's quota as the sum of the workers' (its docs)."""

import base64

import pytest
import yaml

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.names import (
    MULTIKUEUE_ADMISSION_CHECK,
    MULTIKUEUE_CONTROLLER,
    TENANT_ROLE,
)
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import multikueue, settings
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan
from plan_objects import by_kind

NODE = {"metadata": {"name": "gpu-node-0", "labels": {"nvidia.com/gpu.present": "true",
                                                      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "110"},
                   "capacity": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
        "spec": {}}
TEAMS = [{"name": "team-a", "namespaces": ["team-a"], "gpus": 4, "groups": ["team-a"]},
         {"name": "team-b", "namespaces": ["team-b"], "gpus": 4, "groups": ["team-b"]}]


def test_roles_need_one_manager_with_workers():
    assert multikueue.role_errors({"a": "none", "b": "none"}) == []
    assert multikueue.role_errors({"m": "manager", "w1": "worker", "w2": "worker", "x": "none"}) == []
    assert "no host is the manager" in multikueue.role_errors({"w1": "worker"})[0]
    assert "m1, m2 are all managers" in multikueue.role_errors({"m1": "manager", "m2": "manager", "w": "worker"})[0]
    assert "no host is a worker" in multikueue.role_errors({"m": "manager"})[0]
    assert "'boss' is not one of none, manager, worker" in multikueue.role_errors({"m": "boss"})[0]


def test_the_managers_guarantee_is_the_sum_of_the_workers():
    manager = [dict(TEAMS[0], gpus=8), dict(TEAMS[1], gpus=8)]
    workers = {"w1": TEAMS, "w2": TEAMS}
    assert multikueue.guarantee_errors("m", manager, workers) == []
    errors = multikueue.guarantee_errors("m", [dict(TEAMS[0], gpus=6), dict(TEAMS[1], gpus=8)], workers)
    assert errors == ["tenant team-a: guaranteed 6 GPUs on the manager m and 8 on the workers (w1 4, w2 4); the "
                      "manager's guarantee is the sum of the workers' (Kueue's MultiKueue documentation): set gpus 8 "
                      "on m, or change the workers'"]
    errors = multikueue.guarantee_errors("m", manager, {"w1": TEAMS, "w2": TEAMS[:1]})
    assert any(e.startswith("w2: tenant team-b is missing") for e in errors), errors
    errors = multikueue.guarantee_errors("m", manager[:1], workers)
    assert any(e.startswith("w1: tenant team-b is not a tenant of the manager m") for e in errors), errors
    moved = [TEAMS[0], dict(TEAMS[1], namespaces=["elsewhere"])]
    errors = multikueue.guarantee_errors("m", manager, {"w1": TEAMS, "w2": moved})
    assert any("w2: tenant team-b has namespaces ['elsewhere']" in e for e in errors), errors
    errors = multikueue.guarantee_errors("m", [dict(TEAMS[0], gpus={"H100": 8})], {"w1": TEAMS[:1]})
    assert "takes a number of devices" in errors[0]


def test_a_workers_kubeconfig_is_what_kueue_accepts():
    worker = {"current-context": "kwok-w1",
              "contexts": [{"name": "kwok-w1", "context": {"cluster": "kwok-w1", "user": "admin"}}],
              "clusters": [{"name": "kwok-w1", "cluster": {"server": "https://127.0.0.1:32443",
                                                           "certificate-authority": "/pki/ca.crt"}}],
              "users": [{"name": "admin", "user": {"client-certificate": "/pki/admin.crt"}}]}
    made = multikueue.worker_kubeconfig(worker, "", "TOKEN", "w1", read_file=lambda path: b"CA of " + path.encode())
    assert made["clusters"] == [{"name": "w1", "cluster": {"server": "https://127.0.0.1:32443",
                                                           "certificate-authority-data": base64.b64encode(
                                                               b"CA of /pki/ca.crt").decode()}}]
    assert made["users"] == [{"name": "w1", "user": {"token": "TOKEN"}}]
    assert multikueue.kubeconfig_errors(made) == []
    # What Kueue refuses (reason InsecureKubeConfig) is caught in the worker's own file, or named in the result.
    assert multikueue.kubeconfig_errors(worker) == ["cluster kwok-w1: certificate-authority"]
    insecure = yaml.safe_load(yaml.safe_dump(worker))
    insecure["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    with pytest.raises(ValueError, match="insecure-skip-tls-verify"):
        multikueue.worker_kubeconfig(insecure, "kwok-w1", "TOKEN", "w1", read_file=lambda path: b"")
    with pytest.raises(ValueError, match="no context 'other'"):
        multikueue.worker_kubeconfig(worker, "other", "TOKEN", "w1")


def test_the_managers_objects_have_kueues_v1beta2_shapes():
    objects = multikueue.manager_objects("kueue-system", [{"name": "w2", "kubeconfig": "B", "expires": 2},
                                                          {"name": "w1", "kubeconfig": "A", "expires": 1}])
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "fairgpu-worker-w1"), ("Secret", "fairgpu-worker-w2"),
        ("MultiKueueCluster", "w1"), ("MultiKueueCluster", "w2"),
        ("MultiKueueConfig", "fairgpu-workers"), ("AdmissionCheck", MULTIKUEUE_ADMISSION_CHECK)]
    assert objects[0]["stringData"] == {"kubeconfig": "A"} and objects[0]["metadata"]["namespace"] == "kueue-system"
    assert objects[0]["metadata"]["annotations"] == {"fairgpu.io/token-expires": "1"}
    assert objects[2]["spec"] == {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                   "location": "fairgpu-worker-w1"}}}
    assert objects[4]["spec"] == {"clusters": ["w1", "w2"]}
    # What the manager holds is read back from the Secret as the API returns it (data base64).
    returned = dict(objects[0], data={"kubeconfig": base64.b64encode(b"A").decode()})
    assert multikueue.held_credentials([returned], "w1") == {"kubeconfig": "A", "expires": "1"}
    assert multikueue.held_credentials([returned], "w2") is None
    assert objects[5]["spec"]["controllerName"] == MULTIKUEUE_CONTROLLER
    identity = multikueue.worker_identity("kueue-system")
    assert [o["kind"] for o in identity] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
    # Only the batch/v1 Job integration's rows of Kueue's script: no pods, no other frameworks.
    assert {r["apiGroups"][0] for r in identity[1]["rules"]} == {"batch", "kueue.x-k8s.io"}


def test_a_worker_taken_out_of_the_fleet_loses_its_cluster_and_kubeconfig_on_the_manager():
    held = [{"metadata": {"name": "w1"}}, {"metadata": {"name": "w2"}}]
    assert multikueue.removed_workers(held, ["w1", "w2"], "kueue-system") == []
    gone = multikueue.removed_workers(held, ["w1"], "kueue-system")
    assert [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in gone] == [
        ("MultiKueueCluster", "w2", None), ("Secret", "fairgpu-worker-w2", "kueue-system")]


def test_a_manager_holds_work_until_multikueue_dispatches_it_and_a_worker_gives_tenants_no_access():
    plain = tenant_plan(TEAMS, [NODE])
    manager = tenant_plan(TEAMS, [NODE], multikueue="manager")
    worker = tenant_plan(TEAMS, [NODE], multikueue="worker")
    assert plain["errors"] == manager["errors"] == worker["errors"] == []
    for queue in by_kind(manager["objects"], "ClusterQueue"):
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": MULTIKUEUE_ADMISSION_CHECK}]}
    assert all("admissionChecksStrategy" not in q["spec"] for q in by_kind(worker["objects"], "ClusterQueue"))
    assert by_kind(worker["objects"], "RoleBinding") == [] and by_kind(worker["objects"], "Role") == []
    assert {r["metadata"]["name"] for r in by_kind(plain["objects"], "RoleBinding")} == {TENANT_ROLE}
    # The manager's Jobs carry the managedBy Kueue's webhook writes, and no other; elsewhere none but the Job
    # controller's.

    def managed_by_rule(objects):
        policy = next(p for p in by_kind(objects, "ValidatingAdmissionPolicy")
                      if p["metadata"]["name"] == "fairgpu-tenant-jobs")
        return next(v["expression"] for v in policy["spec"]["validations"] if "managedBy" in v["expression"])

    assert "'%s'" % MULTIKUEUE_CONTROLLER in managed_by_rule(manager["objects"])
    assert "'kubernetes.io/job-controller'" in managed_by_rule(worker["objects"])


def test_a_token_is_issued_when_none_is_held_or_it_nears_expiry_or_the_worker_moved():
    assert multikueue.token_due(None, 1000, 100) and multikueue.token_due("", 1000, 100)
    assert multikueue.token_due("1050", 1000, 100) and not multikueue.token_due("1200", 1000, 100)
    assert multikueue.token_due("soon", 1000, 100)
    held = yaml.safe_dump({"clusters": [{"name": "w1", "cluster": {"server": "https://127.0.0.1:1",
                                                                   "certificate-authority-data": "Q0E="}}]})
    assert multikueue.same_cluster(held, "https://127.0.0.1:1", "Q0E=")
    assert not multikueue.same_cluster(held, "https://127.0.0.1:2", "Q0E=")
    assert not multikueue.same_cluster(held, "https://127.0.0.1:1", "other")
    assert not multikueue.same_cluster("{not yaml", "https://127.0.0.1:1", "Q0E=")


@pytest.mark.parametrize("value, expected", [
    ({"workerLostTimeout": "soon"}, "kueue_multikueue.workerLostTimeout: 'soon' is not a Go duration"),
    ({"gcInterval": "-1m"}, "kueue_multikueue.gcInterval: '-1m' is not a Go duration"),
    ({"origin": "not a label!"}, "kueue_multikueue.origin: 'not a label!' is not a label value"),
    ({"dispatcherName": "Incremental"}, "kueue_multikueue.dispatcherName: 'Incremental' is not one of Kueue's"),
    ({"workerLostTimout": "1m"}, "kueue_multikueue.workerLostTimout: unknown key"),
])
def test_multikueue_settings_kueue_would_misread_are_refused(value, expected):
    errors = settings.setting_errors({"kueue_multikueue": value}, "local")
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_multikueue_settings_land_in_the_configuration_only_when_set():
    assert "multiKueue" not in settings.configuration({}, "kueue-system", "helm")
    given = {"workerLostTimeout": "1m", "origin": "fairgpu-manager",
             "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental"}
    assert settings.setting_errors({"kueue_multikueue": given}, "local") == []
    assert settings.configuration({"kueue_multikueue": given}, "kueue-system", "local")["multiKueue"] == given
    errors = settings.setting_errors({"kueue_multikueue": given, "kueue_feature_gates": {"MultiKueue": False}}, "helm")
    assert errors and "turns MultiKueue off" in errors[0]


def test_the_credentials_module_issues_a_token_once_and_keeps_it_while_valid(tmp_path, monkeypatch):
    """Module multikueue_credentials against a stand-in of the TokenRequest API (CoreV1Api): the first run issues a
    token into a kubeconfig with the worker's CA inlined; a second, with what the first returned held, keeps it."""
    import datetime
    import types

    import kubernetes.client
    from ansible_collections.fairgpu.tenancy.plugins.modules import multikueue_credentials

    (tmp_path / "ca.crt").write_bytes(b"CA")
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "current-context": "c", "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"token": "admin"}}]}))
    issued = []

    class TokenRequests(object):
        def __init__(self, _client):
            pass

        def create_namespaced_service_account_token(self, account, namespace, body):
            issued.append((account, namespace, body["spec"]["expirationSeconds"]))
            return types.SimpleNamespace(status=types.SimpleNamespace(
                token="TOKEN", expiration_timestamp=datetime.datetime(2027, 1, 1, tzinfo=datetime.timezone.utc)))

    monkeypatch.setattr(kubernetes.client, "CoreV1Api", TokenRequests)
    module = types.SimpleNamespace(check_mode=False, params=dict(
        name="w1", namespace="kueue-system", service_account="fairgpu-manager", expiration_seconds=100,
        renew_before_seconds=10, current=None, kubeconfig=str(kubeconfig), context=""))
    client = types.SimpleNamespace(client=types.SimpleNamespace(client=None))
    first = multikueue_credentials.converge(module, client, now=0)
    made = yaml.safe_load(first["kubeconfig"])
    assert made["users"] == [{"name": "w1", "user": {"token": "TOKEN"}}]
    assert made["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:1", "certificate-authority-data": "Q0E="}
    assert (first["changed"], first["reason"], first["expires"]) == (True, "none held", "1798761600")
    module.params["current"] = {"kubeconfig": first["kubeconfig"], "expires": first["expires"]}
    second = multikueue_credentials.converge(module, client, now=0)
    assert (second["changed"], second["reason"], second["kubeconfig"]) == (False, "valid", first["kubeconfig"])
    assert issued == [("fairgpu-manager", "kueue-system", 100)]
