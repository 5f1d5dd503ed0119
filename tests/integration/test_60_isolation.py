"""A tenant that tries to cheat, acting with its own credentials (impersonation of a user in its RBAC group)
against the real API server, RBAC, admission and Kueue: each attempt is refused, and the test asserts by whom
and with which message. Writes that must be refused are dry runs, so a regression changes nothing."""

import copy
import json
import os
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from conftest import (KUBECONFIG, ROOT, cluster_queue as cluster_queue_of, condition, delete_jobs, load_job, playbook,
                      reserved_gpus, wait_until, workloads)

KUEUE = ("kueue.x-k8s.io", "v1beta2")
DRY = "All"
RBAC = 'User "%s" cannot %s resource "%s"'
GPU_POD_POLICY = ("ValidatingAdmissionPolicy 'fairgpu-tenant-gpu-pods' with binding 'fairgpu-tenant-gpu-pods' denied "
                  "request: a pod that requests GPUs in a tenant namespace must belong to a Job")
JOB_POLICY = "ValidatingAdmissionPolicy 'fairgpu-tenant-jobs' with binding 'fairgpu-tenant-jobs' denied request: "


def as_user(user, group):
    api = k8s_config.new_client_from_config(config_file=KUBECONFIG)
    api.set_default_header("Impersonate-User", user)
    api.set_default_header("Impersonate-Group", group)
    return api


@pytest.fixture(scope="module")
def alice(cluster):
    """A user of team-a's group."""
    return as_user("alice", "team-a")


@pytest.fixture(scope="module")
def bob(cluster):
    """A user of team-b's group."""
    return as_user("bob", "team-b")


def refused(call, *args, **kwargs):
    with pytest.raises(ApiException) as info:
        call(*args, **kwargs)
    assert info.value.status == 403, info.value.body
    return json.loads(info.value.body)["message"]


def gpu_pod(name, namespace, gpus=1, containers=1, owner_uid=None):
    meta = {"name": name, "namespace": namespace}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "forged", "uid": owner_uid,
                                    "controller": True}]
    amount = {"nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [
        {"name": "c%d" % i, "image": "x", "resources": {"requests": amount, "limits": amount}} for i in range(containers)]}}


def judged(kueue, namespace, job):
    """The QuotaReserved condition Kueue gave the Workload of ``job``."""
    def get():
        for w in workloads(kueue, namespace):
            if w["metadata"]["ownerReferences"][0]["name"] == job and condition(w, "QuotaReserved"):
                return condition(w, "QuotaReserved")
    return wait_until(get, 30, what="Kueue to judge %s" % job)


def test_1_bare_gpu_pod(alice, core):
    message = refused(k8s.CoreV1Api(alice).create_namespaced_pod, "team-a", gpu_pod("bare", "team-a"), dry_run=DRY)
    assert RBAC % ("alice", "create", "pods") in message
    # Whoever may create pods (here the cluster admin), a GPU pod outside a Job is refused in a tenant namespace.
    message = refused(core.create_namespaced_pod, "team-a", gpu_pod("bare", "team-a"), dry_run=DRY)
    assert GPU_POD_POLICY in message
    # A pod without GPUs passes, and the tenant's LimitRange gives it none (with only a maximum, the API server
    # would default every container to the maximum).
    cpu_only = {"metadata": {"name": "cpu-only"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    created = core.create_namespaced_pod("team-a", cpu_only, dry_run=DRY)
    assert created.spec.containers[0].resources.requests["nvidia.com/gpu"] == "0"


def test_2_job_naming_the_other_tenants_queue_is_never_admitted(alice, batch, core, kueue):
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", load_job("it-other-queue", "team-a", queue="team-b-queue",
                                                                   labels={"it-cheat": "1"}))
    try:
        reserved = judged(kueue, "team-a", "it-other-queue")
        assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible")
        assert reserved["message"] == "LocalQueue team-b-queue doesn't exist"
        assert batch.read_namespaced_job("it-other-queue", "team-a").spec.suspend is True
        assert core.list_namespaced_pod("team-a", label_selector="job-name=it-other-queue").items == []
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


@pytest.mark.parametrize("plural, namespaced", [
    ("clusterqueues", False), ("cohorts", False), ("resourceflavors", False), ("workloadpriorityclasses", False),
    ("localqueues", True),
])
def test_3_kueue_objects_are_read_only(alice, plural, namespaced):
    api = k8s.CustomObjectsApi(alice)
    body = {"apiVersion": "/".join(KUEUE), "kind": "x", "metadata": {"name": "it-cheat"}}
    if plural == "localqueues":  # a LocalQueue of its own pointing at team-b's ClusterQueue
        body.update(kind="LocalQueue", spec={"clusterQueue": "team-b"})
        calls = [("create", api.create_namespaced_custom_object, KUEUE + ("team-a", plural, body)),
                 ("patch", api.patch_namespaced_custom_object, KUEUE + ("team-a", plural, "team-a-queue", {})),
                 ("delete", api.delete_namespaced_custom_object, KUEUE + ("team-a", plural, "team-a-queue"))]
    else:
        calls = [("create", api.create_cluster_custom_object, KUEUE + (plural, body)),
                 ("patch", api.patch_cluster_custom_object, KUEUE + (plural, "team-b", {})),
                 ("delete", api.delete_cluster_custom_object, KUEUE + (plural, "team-b"))]
    for verb, call, args in calls:
        assert RBAC % ("alice", verb, plural) in refused(call, *args, dry_run=DRY)


def test_3_quota_limits_and_rbac_of_its_namespace_are_read_only(alice):
    core, rbac = k8s.CoreV1Api(alice), k8s.RbacAuthorizationV1Api(alice)
    quota = {"metadata": {"name": "fairgpu-gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "100"}}}
    assert RBAC % ("alice", "patch", "resourcequotas") in refused(
        core.patch_namespaced_resource_quota, "fairgpu-gpu-quota", "team-a", quota, dry_run=DRY)
    assert RBAC % ("alice", "delete", "resourcequotas") in refused(
        core.delete_namespaced_resource_quota, "fairgpu-gpu-quota", "team-a", dry_run=DRY)
    assert RBAC % ("alice", "delete", "limitranges") in refused(
        core.delete_namespaced_limit_range, "fairgpu-defaults", "team-a", dry_run=DRY)
    binding = {"metadata": {"name": "it-cheat"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}]}
    assert RBAC % ("alice", "create", "rolebindings") in refused(
        rbac.create_namespaced_role_binding, "team-a", binding, dry_run=DRY)
    assert RBAC % ("alice", "patch", "roles") in refused(
        rbac.patch_namespaced_role, "fairgpu-tenant", "team-a", {"rules": []}, dry_run=DRY)
    assert RBAC % ("alice", "create", "clusterrolebindings") in refused(
        rbac.create_cluster_role_binding, dict(binding, roleRef=dict(binding["roleRef"], name="cluster-admin")),
        dry_run=DRY)


def test_4_the_other_tenants_namespace_is_out_of_reach(alice):
    core, batch, custom = k8s.CoreV1Api(alice), k8s.BatchV1Api(alice), k8s.CustomObjectsApi(alice)
    assert RBAC % ("alice", "create", "jobs") in refused(
        batch.create_namespaced_job, "team-b", load_job("it-trespass", "team-b", queue="team-b-queue"), dry_run=DRY)
    assert RBAC % ("alice", "list", "jobs") in refused(batch.list_namespaced_job, "team-b")
    assert RBAC % ("alice", "list", "pods") in refused(core.list_namespaced_pod, "team-b")
    assert RBAC % ("alice", "list", "workloads") in refused(custom.list_namespaced_custom_object, *KUEUE, "team-b",
                                                            "workloads")
    assert RBAC % ("alice", "list", "secrets") in refused(core.list_namespaced_secret, "team-b")
    assert RBAC % ("alice", "list", "secrets") in refused(core.list_namespaced_secret, "team-a")


def test_5_and_6_more_than_the_maximum_waits_and_cannot_be_unsuspended(alice, batch, core, kueue):
    api = k8s.BatchV1Api(alice)
    one = load_job("it-one-big-pod", "team-a", queue="team-a-queue", gpus=17, labels={"it-cheat": "1"})
    many = load_job("it-many-pods", "team-a", queue="team-a-queue", labels={"it-cheat": "1"})
    many["spec"].update(parallelism=17, completions=17)
    api.create_namespaced_job("team-a", one)
    api.create_namespaced_job("team-a", many)
    try:
        reserved = judged(kueue, "team-a", "it-one-big-pod")
        assert reserved["status"] == "False" and "requests must not be above the limitRange max" in reserved["message"]
        reserved = judged(kueue, "team-a", "it-many-pods")
        assert reserved["status"] == "False"
        assert "insufficient quota for nvidia.com/gpu in flavor nvidia-h100-80gb-hbm3" in reserved["message"]
        assert "current podset request (17) > maximum capacity (16)" in reserved["message"]

        # 5: the tenant cannot lift the suspension or give its Workload an admission.
        assert RBAC % ("alice", "patch", "jobs") in refused(
            api.patch_namespaced_job, "it-one-big-pod", "team-a", {"spec": {"suspend": False}})
        name = next(w["metadata"]["name"] for w in workloads(kueue, "team-a")
                    if w["metadata"]["ownerReferences"][0]["name"] == "it-one-big-pod")
        assert 'cannot patch resource "workloads/status"' in refused(
            k8s.CustomObjectsApi(alice).patch_namespaced_custom_object_status, *KUEUE, "team-a", "workloads", name,
            {"status": {"admission": {"clusterQueue": "team-a"}}})
        for job in ("it-one-big-pod", "it-many-pods"):
            assert batch.read_namespaced_job(job, "team-a").spec.suspend is True
            assert core.list_namespaced_pod("team-a", label_selector="job-name=" + job).items == []
    finally:
        delete_jobs(batch, "team-a", "it-cheat")

    # 6, past Kueue: a pod claiming a Job as its owner, by whoever may create pods, still meets the LimitRange (no
    # pod larger than a node, 8) and the ResourceQuota (16 in all).
    forged = gpu_pod("it-past-kueue", "team-a", gpus=9, containers=2, owner_uid=str(uuid.uuid4()))
    message = refused(core.create_namespaced_pod, "team-a", forged, dry_run=DRY)
    assert "maximum nvidia.com/gpu usage per Container is 8, but limit is 9" in message, message
    forged = gpu_pod("it-past-kueue", "team-a", gpus=5, containers=2, owner_uid=str(uuid.uuid4()))
    message = refused(core.create_namespaced_pod, "team-a", forged, dry_run=DRY)
    assert "maximum nvidia.com/gpu usage per Pod is 8, but limit is 10" in message, message


def test_7_priority_only_from_the_allowed_classes(alice):
    api = k8s.BatchV1Api(alice)
    high = load_job("it-high", "team-a", queue="team-a-queue", labels={"kueue.x-k8s.io/priority-class": "fairgpu-high"})
    assert refused(api.create_namespaced_job, "team-a", high, dry_run=DRY).endswith(
        JOB_POLICY + "WorkloadPriorityClass fairgpu-high is not allowed in namespace team-a; use one of: fairgpu-low, "
        "fairgpu-normal")
    critical = load_job("it-critical", "team-a", queue="team-a-queue")
    critical["spec"]["template"]["spec"]["priorityClassName"] = "system-cluster-critical"
    assert JOB_POLICY + "pod priority (priorityClassName, priority) is not allowed in tenant Jobs" in refused(
        api.create_namespaced_job, "team-a", critical, dry_run=DRY)
    normal = load_job("it-normal", "team-a", queue="team-a-queue",
                      labels={"kueue.x-k8s.io/priority-class": "fairgpu-normal"})
    assert api.create_namespaced_job("team-a", normal, dry_run=DRY).metadata.name == "it-normal"


def test_7_priority_does_not_take_the_other_tenants_guarantee(alice, bob, batch, kueue):
    for i in range(8):
        k8s.BatchV1Api(bob).create_namespaced_job("team-b", load_job("it-held-%d" % i, "team-b", queue="team-b-queue",
                                                                     seconds=120, labels={"it-cheat": "1"}))
    try:
        wait_until(lambda: sum(1 for w in workloads(kueue, "team-b") if w["metadata"]["name"].startswith("job-it-held")
                               and (condition(w, "QuotaReserved") or {}).get("status") == "True") == 8,
                   60, what="team-b to hold its guarantee")
        jump = load_job("it-jump", "team-a", queue="team-a-queue",
                        labels={"it-cheat": "1", "kueue.x-k8s.io/priority-class": "fairgpu-normal"})
        jump["spec"].update(parallelism=9, completions=9)
        k8s.BatchV1Api(alice).create_namespaced_job("team-a", jump)
        reserved = judged(kueue, "team-a", "it-jump")
        assert reserved["status"] == "False" and "insufficient unused quota" in reserved["message"], reserved
        held = [w for w in workloads(kueue, "team-b") if w["metadata"]["name"].startswith("job-it-held")]
        assert all(condition(w, "QuotaReserved")["status"] == "True" and not condition(w, "Evicted") for w in held)
    finally:
        delete_jobs(batch, "team-a", "it-cheat")
        delete_jobs(batch, "team-b", "it-cheat")
        wait_until(lambda: not [w for w in workloads(kueue, "team-a") + workloads(kueue, "team-b")
                                if "-it-" in w["metadata"]["name"]], 60, what="the Workloads to go")


def test_8_a_job_claiming_its_own_admitted_job_as_controller_is_refused(alice, batch, kueue):
    api = k8s.BatchV1Api(alice)
    parent = api.create_namespaced_job("team-a", load_job("it-parent", "team-a", queue="team-a-queue", gpus=0,
                                                          seconds=120, labels={"it-cheat": "1"}))
    try:
        assert judged(kueue, "team-a", "it-parent")["status"] == "True"
        child = load_job("it-child", "team-a", labels={"it-cheat": "1"})
        child["spec"].update(parallelism=16, completions=16)
        child["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "it-parent",
                                                 "uid": parent.metadata.uid, "controller": True}]
        # Without the policy Kueue would run it unsuspended as it-parent's child, with no Workload of its own.
        assert JOB_POLICY + "a tenant Job may not name a controller owner" in refused(
            api.create_namespaced_job, "team-a", child, dry_run=DRY)
        # The same for whoever creates it: the policy binds every user in tenant namespaces.
        assert JOB_POLICY + "a tenant Job may not name a controller owner" in refused(
            batch.create_namespaced_job, "team-a", child, dry_run=DRY)
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


def test_9_pods_are_quota_so_tiny_pods_cannot_fill_the_nodes(alice, batch, kueue):
    tiny = load_job("it-tiny", "team-a", queue="team-a-queue", gpus=0, labels={"it-cheat": "1"})
    tiny["spec"].update(parallelism=224, completions=224)
    for container in tiny["spec"]["template"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", tiny)
    try:
        reserved = judged(kueue, "team-a", "it-tiny")
        assert reserved["status"] == "False" and "insufficient quota for pods in flavor" in reserved["message"], reserved
        cq = kueue.get_cluster_custom_object(*KUEUE, "clusterqueues", "team-a")
        pods = next(r for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "pods")
        assert pods == {"name": "pods", "nominalQuota": "100"}  # (110 - 10 for the nodes' daemons) x 2 nodes / 2
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


@pytest.mark.parametrize("route, change, message", [
    ("env", lambda s: s["containers"][0].update(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
     "tenant Jobs may not set NVIDIA_* environment variables"),
    ("privileged", lambda s: s["containers"][0].update(securityContext={"privileged": True}),
     "tenant Jobs may not run privileged containers"),
    ("host-dev", lambda s: s.update(volumes=[{"name": "dev", "hostPath": {"path": "/dev"}}]),
     "tenant Jobs may not mount hostPath volumes"),
    ("host-pid", lambda s: s.update(hostPID=True), "tenant Jobs may not use the node's namespaces"),
    ("host-network", lambda s: s.update(hostNetwork=True), "tenant Jobs may not use the node's namespaces"),
    ("host-ipc", lambda s: s.update(hostIPC=True), "tenant Jobs may not use the node's namespaces"),
    ("sys-admin", lambda s: s["containers"][0].update(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
     "tenant Jobs may add only the capabilities Pod Security baseline allows"),
    ("init-sys-admin", lambda s: s.update(initContainers=[{"name": "i", "image": "x", "securityContext": {
        "capabilities": {"add": ["NET_ADMIN"]}}}]), "tenant Jobs may add only the capabilities"),
    ("init-env", lambda s: s.update(initContainers=[{"name": "i", "image": "x", "env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]), "tenant Jobs may not set NVIDIA_* environment variables"),
    ("env-from", lambda s: s["containers"][0].update(envFrom=[{"prefix": "NVIDIA_", "configMapRef": {
        "name": "kube-root-ca.crt"}}]), "tenant Jobs may not set NVIDIA_* environment variables"),
    ("runtime-class", lambda s: s.update(runtimeClassName="nvidia"), "tenant Jobs may not choose a runtime class"),
    ("host-port", lambda s: s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
     "tenant Jobs may not use host ports"),
    ("grace", lambda s: s.update(terminationGracePeriodSeconds=3600),
     "tenant Jobs may ask for at most 30 s of terminationGracePeriodSeconds"),
])
def test_11_the_device_door_is_refused_when_the_job_is_created(alice, route, change, message):
    job = load_job("it-door-" + route, "team-a", queue="team-a-queue", gpus=0)
    change(job["spec"]["template"]["spec"])
    assert JOB_POLICY + message in refused(k8s.BatchV1Api(alice).create_namespaced_job, "team-a", job, dry_run=DRY)


def test_11_cdi_device_annotations_are_refused(alice):
    job = load_job("it-door-cdi", "team-a", queue="team-a-queue", gpus=0)
    job["spec"]["template"]["metadata"]["annotations"]["nvidia.cdi.k8s.io/container.load"] = "nvidia.com/gpu=all"
    assert JOB_POLICY + "tenant Jobs may not name CDI devices in pod annotations" in refused(
        k8s.BatchV1Api(alice).create_namespaced_job, "team-a", job, dry_run=DRY)


def test_11_pod_security_baseline_is_enforced_on_pods_and_allowed_capabilities_pass(alice, core):
    labels = core.read_namespace("team-a").metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    pod = {"metadata": {"name": "it-privileged"}, "spec": {"containers": [
        {"name": "c", "image": "x", "securityContext": {"privileged": True}}]}}
    message = refused(core.create_namespaced_pod, "team-a", pod, dry_run=DRY)
    assert 'violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)' in message
    # warn: restricted answers the tenant on the Job itself (a Warning header), which enforce never does on a Job.
    plain = load_job("it-warned", "team-a", queue="team-a-queue", gpus=0)
    _job, _status, headers = k8s.BatchV1Api(alice).create_namespaced_job_with_http_info("team-a", plain, dry_run=DRY)
    warning = headers.get("Warning", "")  # 299 - "would violate PodSecurity \"restricted:latest\": ..."
    assert warning.startswith('299 - "would violate PodSecurity') and "restricted:latest" in warning, headers
    # A capability the baseline profile allows, and a grace period within the bound, pass the Job policy.
    job = load_job("it-chown", "team-a", queue="team-a-queue", gpus=0)
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["CHOWN"]}}
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    assert k8s.BatchV1Api(alice).create_namespaced_job("team-a", job, dry_run=DRY).metadata.name == "it-chown"


def test_12_a_pod_larger_than_any_node_is_never_admitted(alice, batch, core, kueue):
    big = load_job("it-too-big", "team-a", queue="team-a-queue", gpus=8, labels={"it-cheat": "1"})
    containers = big["spec"]["template"]["spec"]["containers"]
    containers.append(dict(containers[0], name="second"))
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", big)
    try:
        reserved = judged(kueue, "team-a", "it-too-big")
        assert reserved["status"] == "False" and "didn't satisfy LimitRange constraints" in reserved["message"], reserved
        assert core.list_namespaced_pod("team-a", label_selector="job-name=it-too-big").items == []
        cq = cluster_queue_of(kueue, "team-a")
        assert reserved_gpus(cq) == 0
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


def test_12_an_admitted_job_whose_pods_never_run_is_evicted_then_deactivated(alice, batch, kueue):
    """Kueue's waitForPodsReady (60 s here, tests/integration/vars.yml; 10m by default): a Job admitted whose pod
    can never be scheduled (a node selector no node has) loses its quota, is requeued once and then deactivated."""
    stuck = load_job("it-stuck", "team-a", queue="team-a-queue", labels={"it-cheat": "1"})
    stuck["spec"]["template"]["spec"]["nodeSelector"] = {"fairgpu.io/no-such-node": "true"}
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", stuck)
    try:
        assert judged(kueue, "team-a", "it-stuck")["status"] == "True"

        def evicted():
            for w in workloads(kueue, "team-a"):
                if w["metadata"]["ownerReferences"][0]["name"] == "it-stuck":
                    cond = condition(w, "Evicted") or {}
                    return w if cond.get("reason") == "PodsReadyTimeout" else None
        workload = wait_until(evicted, 120, what="Kueue to evict it-stuck for PodsReadyTimeout")
        assert condition(workload, "Evicted")["message"].startswith("Exceeded the PodsReady timeout team-a/")

        def deactivated():
            for w in workloads(kueue, "team-a"):
                if w["metadata"]["ownerReferences"][0]["name"] == "it-stuck" and w["spec"].get("active") is False:
                    return w
        wait_until(deactivated, 180, what="Kueue to deactivate it-stuck after its requeue")

        def released():
            workload = deactivated()
            return (condition(workload, "QuotaReserved") or {}).get("status") != "True" and \
                reserved_gpus(cluster_queue_of(kueue, "team-a")) == 0
        wait_until(released, 30, what="the deactivated Workload's quota to be released")
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


def test_the_report_has_the_attempts(cluster):
    run = playbook("validate.yml", "-e", json.dumps({"validate_scenarios": ["isolation"]}))
    assert run.rc == 0, run.messages()
    results = os.path.join(ROOT, "results", "integration")
    with open(os.path.join(results, "report.json")) as handle:
        report = json.load(handle)
    scenario = next(s for s in report["scenarios"] if s["name"] == "isolation")
    numbers = sorted({c["check"].split(".")[0] for c in scenario["checks"] if c["check"][0].isdigit()}, key=int)
    assert numbers == [str(n) for n in range(1, 23)]
    assert all(c["passed"] for c in scenario["checks"]), [c for c in scenario["checks"] if not c["passed"]]
    rows = {c["check"]: c for c in scenario["checks"]}
    assert "no tenant's Running pods hold more GPUs than Kueue reserved for it (isolation)" in rows
    child = next(c for name, c in rows.items() if name.startswith("8. "))
    assert "a tenant Job may not name a controller owner" in child["observed"]
    door = next(c for name, c in rows.items() if name.startswith("11. Jobs"))
    assert "13 of 13 refused by ValidatingAdmissionPolicy fairgpu-tenant-jobs" in door["observed"]
    slots = [c for name, c in rows.items() if name.startswith("9. ")]
    assert "insufficient quota for pods" in slots[0]["observed"]
    assert scenario["metrics"]["pod_slots_time_to_running_seconds"] <= 60
    assert scenario["metrics"]["guarantee_time_to_running_seconds"] <= 60
    with open(os.path.join(results, "report.md")) as handle:
        markdown = handle.read()
    assert "## A tenant that tries to cheat: team-a against team-b" in markdown
    assert "| 2. Job labelled with team-b's LocalQueue team-b-queue | never admitted" in markdown


# Round three: routes that keep GPUs after Kueue released them, lock the other tenant out, hold quota for pods that
# never run, or go around Kueue with the built-in edit role. Each is refused at admission, naming the policy and
# the field.
DELETIONS = ("ValidatingAdmissionPolicy 'fairgpu-tenant-job-deletions' with binding 'fairgpu-tenant-job-deletions' "
             "denied request: a tenant Job is deleted with its pods (DeleteOptions propagationPolicy Background or "
             "Foreground")


def _template(job):
    return job["spec"]["template"]["spec"]


def _resources(requests, limits=None):
    def change(job):
        _template(job)["containers"][0]["resources"] = dict({"requests": requests}, **({"limits": limits} if limits else {}))
    return change


def _anti_affinity(**selector):
    term = dict({"labelSelector": {"matchExpressions": [{"key": "job-name", "operator": "Exists"}]},
                 "topologyKey": "nvidia.com/gpu.product"}, **selector)
    return lambda job: _template(job).update(affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})


@pytest.mark.parametrize("route, change, message", [
    ("job-finalizer", lambda job: job["metadata"].update(finalizers=["example.com/keep"]),
     "tenant Jobs may not carry finalizers (metadata.finalizers)"),
    ("pod-finalizer", lambda job: job["spec"]["template"]["metadata"].update(finalizers=["example.com/keep"]),
     "tenant Jobs may not give their pods finalizers (template metadata.finalizers)"),
    ("lockout-selector", _anti_affinity(namespaceSelector={"matchLabels": {"fairgpu.io/tenant": "team-b"}}),
     "tenant Jobs' pod affinity and anti-affinity terms may name pods of their own namespace only"),
    ("lockout-namespaces", _anti_affinity(namespaces=["team-b"]),
     "tenant Jobs' pod affinity and anti-affinity terms may name pods of their own namespace only"),
    ("node-name", lambda job: _template(job).update(nodeName="gpu-node-0"), "tenant Jobs may not set nodeName"),
    ("scheduler", lambda job: _template(job).update(schedulerName="nowhere"),
     "tenant Jobs may name only the scheduler default-scheduler (schedulerName)"),
    ("gates", lambda job: _template(job).update(schedulingGates=[{"name": "example.com/hold"}]),
     "tenant Jobs may not set schedulingGates"),
    ("managed-by", lambda job: job["spec"].update(managedBy="example.com/elsewhere"),
     "tenant Jobs may not set spec.managedBy"),
    ("cpu-limit", _resources({"cpu": "10m", "memory": "16Mi"}, {"cpu": "96", "memory": "16Mi"}),
     "tenant Jobs' cpu limits may be at most 4 times their requests"),
    ("memory-limit", _resources({"cpu": "10m", "memory": "16Mi"}, {"cpu": "10m", "memory": "1Ti"}),
     "tenant Jobs' memory limits may be at most 2 times their requests"),
    # No limit: the LimitRange's default limit (1 CPU) applies, below the request, and the pod would be refused.
    ("request-above-default-limit", _resources({"cpu": "8", "memory": "1Gi"}),
     "tenant Jobs' cpu limits may be at most 4 times their requests, and no request above its limit"),
    ("pod-level-limit", lambda job: _template(job).update(resources={"requests": {"cpu": "1"}, "limits": {"cpu": "96"}}),
     "tenant Jobs' cpu limits may be at most 4 times their requests"),
    ("dra", lambda job: (_template(job).update(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpus"}]),
                         _template(job)["containers"][0]["resources"].update(claims=[{"name": "gpu"}])),
     "tenant Jobs may not claim devices through dynamic resource allocation (resourceClaims, resources.claims)"),
    ("big", lambda job: _template(job)["containers"][0].update(
        env=[{"name": "V%d" % i, "value": "x" * 64} for i in range(2000)]),
     "a tenant Job may carry at most 256 KiB of labels, annotations, commands, arguments and environment values"),
    ("seccomp", lambda job: _template(job).update(securityContext={"seccompProfile": {"type": "Unconfined"}}),
     "tenant Jobs may not run Unconfined by seccomp (Pod Security baseline)"),
    # The red team's node filling: a tenant's share of memory is a node's allocatable (1Ti), and Kueue counts it
    # cluster-wide only. The nodes have 96 CPUs and 1Ti per 8 GPUs: 12 CPUs and 131072 MiB per GPU.
    ("memory-hog", _resources({"cpu": "1", "memory": "1000Gi"}, {"cpu": "1", "memory": "1000Gi"}),
     "a tenant pod may request at most 131072 MiB of memory per device it asks for"),
    ("cpu-per-gpu", lambda job: _template(job)["containers"][0].update(resources={
        "requests": {"cpu": "13", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "13", "memory": "1Gi", "nvidia.com/gpu": "1"}}),
     "a tenant pod may request at most 12 CPUs of cpu per device it asks for"),
    ("pinned", lambda job: _template(job).update(nodeSelector={"kubernetes.io/hostname": "gpu-node-1"}),
     "tenant Jobs may not choose their node (nodeSelector or node affinity on kubernetes.io/hostname"),
    ("sysctl", lambda job: _template(job).update(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
     "tenant Jobs may set only the sysctls Pod Security baseline calls safe"),
    ("selinux", lambda job: _template(job)["containers"][0].update(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
     "tenant Jobs may set seLinuxOptions only to the types container_t"),
    ("apparmor", lambda job: _template(job)["containers"][0].update(securityContext={
        "appArmorProfile": {"type": "Unconfined"}}), "tenant Jobs may use only the AppArmor profiles"),
    ("probe-host", lambda job: _template(job)["containers"][0].update(livenessProbe={
        "httpGet": {"host": "169.254.169.254", "port": 80}}), "tenant Jobs may not point probes or lifecycle hooks"),
])
def test_13_to_19_round_three_jobs_are_refused_when_created(alice, route, change, message):
    job = load_job("it-r3-" + route, "team-a", queue="team-a-queue", gpus=0)
    change(job)
    assert JOB_POLICY + message in refused(k8s.BatchV1Api(alice).create_namespaced_job, "team-a", job, dry_run=DRY)


def test_13_a_job_is_deleted_with_its_pods(alice, batch, kueue):
    api = k8s.BatchV1Api(alice)
    api.create_namespaced_job("team-a", load_job("it-orphan", "team-a", queue="team-a-queue", seconds=120,
                                                 labels={"it-cheat": "1"}))
    try:
        assert judged(kueue, "team-a", "it-orphan")["status"] == "True"
        # --cascade=orphan, the batch/v1 default with no DeleteOptions, and the deprecated orphanDependents.
        for options in ({"propagation_policy": "Orphan"}, {}, {"orphan_dependents": True}):
            assert DELETIONS in refused(api.delete_namespaced_job, "it-orphan", "team-a", dry_run=DRY, **options)
        assert api.delete_namespaced_job("it-orphan", "team-a", propagation_policy="Background", dry_run=DRY)
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


@pytest.fixture()
def editor(cluster):
    """A user of team-a's group and of a group bound to Kubernetes' built-in edit ClusterRole in team-a, as many
    platforms hand it out (the kubernetes client sends one Impersonate-Group header, so the binding names the
    user)."""
    rbac = k8s.RbacAuthorizationV1Api(cluster)
    binding = {"metadata": {"name": "it-edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "eve"}]}
    rbac.create_namespaced_role_binding("team-a", binding)
    yield as_user("eve", "team-a")
    rbac.delete_namespaced_role_binding("it-edit", "team-a")


def test_20_the_edit_role_runs_nothing_outside_kueue(editor, alice, batch, core):
    pods, apps, jobs = k8s.CoreV1Api(editor), k8s.AppsV1Api(editor), k8s.BatchV1Api(editor)
    creators = ("ValidatingAdmissionPolicy 'fairgpu-tenant-pods' with binding 'fairgpu-tenant-pods' denied request: "
                "pods in a tenant namespace are created and changed by the Job controller for Jobs that Kueue admitted; "
                "eve may not create them")
    big_cpu = {"metadata": {"name": "it-cpu"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": "95"}, "limits": {"cpu": "95"}}}]}}
    assert creators in refused(pods.create_namespaced_pod, "team-a", big_cpu, dry_run=DRY)
    forged = gpu_pod("it-forged", "team-a", owner_uid=str(uuid.uuid4()))
    assert creators in refused(pods.create_namespaced_pod, "team-a", forged, dry_run=DRY)
    deployment = {"metadata": {"name": "it-dep"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
        "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    assert ("ValidatingAdmissionPolicy 'fairgpu-tenant-workloads' with binding 'fairgpu-tenant-workloads' denied "
            "request: tenant namespaces run work as Jobs that Kueue admits: a Deployment would run pods outside") in refused(
        apps.create_namespaced_deployment, "team-a", deployment, dry_run=DRY)
    blob = {"metadata": {"name": "it-blob"}, "data": {"blob": "x" * (257 * 1024)}}
    assert ("ValidatingAdmissionPolicy 'fairgpu-tenant-object-size' with binding 'fairgpu-tenant-object-size' denied "
            "request: a ConfigMap in a tenant namespace may hold at most 256 KiB") in refused(
        pods.create_namespaced_config_map, "team-a", blob, dry_run=DRY)
    # Its own running pod relabelled off its Job's selector: the Job controller would release it, unowned, and
    # start a replacement (the red team's route).
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", load_job("it-relabel", "team-a", queue="team-a-queue",
                                                                   seconds=120, labels={"it-cheat": "1"}))
    try:
        pod = wait_until(lambda: next((p for p in core.list_namespaced_pod("team-a", label_selector="job-name=it-relabel")
                                       .items if p.status.phase == "Running"), None), 60, what="it-relabel's pod to run")
        assert ("ValidatingAdmissionPolicy 'fairgpu-tenant-pods' with binding 'fairgpu-tenant-pods' denied request: "
                "pods in a tenant namespace are created and changed by the Job controller for Jobs that Kueue admitted; "
                "eve may not change them") in refused(pods.patch_namespaced_pod, pod.metadata.name, "team-a", {
                    "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "detached"}}})
    finally:
        delete_jobs(batch, "team-a", "it-cheat")
    # Its own waiting Job: more GPUs than its maximum, so Kueue never admits it; only Kueue changes it.
    k8s.BatchV1Api(alice).create_namespaced_job("team-a", load_job("it-held", "team-a", queue="team-a-queue", gpus=17,
                                                                   labels={"it-cheat": "1"}))
    try:
        # A deletecollection is admitted Job by Job (with none to delete, nothing is refused).
        assert DELETIONS in refused(jobs.delete_collection_namespaced_job, "team-a", label_selector="it-cheat",
                                    propagation_policy="Orphan", dry_run=DRY)
        for change in ({"suspend": False}, {"parallelism": 16}):
            assert JOB_POLICY + "only Kueue changes a tenant Job once it is created" in refused(
                jobs.patch_namespaced_job, "it-held", "team-a", {"spec": change}, dry_run=DRY)
        assert batch.read_namespaced_job("it-held", "team-a").spec.suspend is True
    finally:
        delete_jobs(batch, "team-a", "it-cheat")


def test_20_past_kueue_the_limit_range_and_the_priority_quota_hold(core):
    # Someone allowed to create pods (here the cluster admin): the LimitRange's ratio and the PriorityClass quota.
    ratio = {"metadata": {"name": "it-ratio"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": "10m"}, "limits": {"cpu": "96"}}}]}}
    assert "cpu max limit to request ratio per Container is 4, but provided ratio is 9600" in refused(
        core.create_namespaced_pod, "team-a", ratio, dry_run=DRY)
    critical = {"metadata": {"name": "it-critical"}, "spec": {"priorityClassName": "system-node-critical",
                                                              "containers": [{"name": "c", "image": "x"}]}}
    assert "exceeded quota: fairgpu-denied-priority, requested: pods=1, used: pods=0, limited: pods=0" in refused(
        core.create_namespaced_pod, "team-a", critical, dry_run=DRY)


@pytest.fixture(scope="module")
def restricted_namespace(cluster):
    """The Job policy as a namespace enforcing restricted gets it (tenants_isolation.pod_security_enforce:
    restricted), bound to a namespace of its own under another name, so that the suite's tenants keep baseline."""
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import admission, objects

    admissions = k8s.AdmissionregistrationV1Api(cluster)
    policy, binding = [copy.deepcopy(o) for o in admission.policies(
        objects.isolation_policy({"pod_security_enforce": "restricted"}), objects.DEFAULT_CONTAINER_RESOURCES)
        if o["metadata"]["name"] == "fairgpu-tenant-jobs"]
    for obj in (policy, binding):
        obj["metadata"] = {"name": "it-restricted-jobs"}
    binding["spec"]["policyName"] = "it-restricted-jobs"
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"it-restricted": "true"}}}
    core = k8s.CoreV1Api(cluster)
    core.create_namespace({"metadata": {"name": "it-restricted", "labels": {"it-restricted": "true"}}})
    admissions.create_validating_admission_policy(policy)
    admissions.create_validating_admission_policy_binding(binding)
    try:
        yield "it-restricted"
    finally:
        admissions.delete_validating_admission_policy_binding("it-restricted-jobs")
        admissions.delete_validating_admission_policy("it-restricted-jobs")
        core.delete_namespace("it-restricted")


@pytest.mark.parametrize("route, change, message", [
    ("escalation", lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
     "tenant Jobs must set securityContext.allowPrivilegeEscalation: false in every container"),
    ("capability", lambda s: s["containers"][0]["securityContext"].update(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
     "tenant Jobs must drop ALL capabilities and may add only NET_BIND_SERVICE"),
    ("root", lambda s: s["securityContext"].pop("runAsNonRoot"), "tenant Jobs must set securityContext.runAsNonRoot: true"),
    ("uid-0", lambda s: s["securityContext"].update(runAsUser=0), "tenant Jobs may not set securityContext.runAsUser: 0"),
    ("seccomp", lambda s: s["securityContext"].pop("seccompProfile"),
     "tenant Jobs must set securityContext.seccompProfile.type RuntimeDefault or Localhost"),
    ("nfs", lambda s: s.update(volumes=[{"name": "n", "nfs": {"server": "nfs.example", "path": "/"}}]),
     "tenant Jobs may use only the volume types Pod Security restricted allows"),
])
def test_19_restricted_namespaces_refuse_what_restricted_refuses(batch, restricted_namespace, route, change, message):
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.isolation import probe_job

    job = probe_job("it-" + route, restricted_namespace, "nvidia.com/gpu", gpus=0)  # passes restricted as it is
    compliant = copy.deepcopy(job)
    change(job["spec"]["template"]["spec"])

    def refusal():
        try:
            batch.create_namespaced_job(restricted_namespace, job, dry_run=DRY)
        except ApiException as exc:
            return json.loads(exc.body)["message"]
        return None
    # A new binding takes effect within seconds (the API server's policy informer).
    assert ("ValidatingAdmissionPolicy 'it-restricted-jobs' with binding 'it-restricted-jobs' denied request: "
            + message) in wait_until(refusal, 20, what="the restricted Job policy to refuse " + route)
    assert batch.create_namespaced_job(restricted_namespace, compliant, dry_run=DRY).metadata.name == job["metadata"]["name"]
