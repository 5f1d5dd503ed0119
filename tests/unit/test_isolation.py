"""Reading the API server's refusals and judging the cheating tenant's attempts (messages as the embedded
cluster's API server, RBAC, admission policies and ResourceQuota wrote them)."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation

RBAC = 'pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "team-a"'
POLICY = ("pods \"x\" is forbidden: ValidatingAdmissionPolicy 'fairgpu-tenant-gpu-pods' with binding "
          "'fairgpu-tenant-gpu-pods' denied request: a pod that requests GPUs ...")
QUOTA = ('pods "x" is forbidden: exceeded quota: fairgpu-gpu-quota, requested: requests.nvidia.com/gpu=18, '
         'used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=16')
LIMIT = 'pods "x" is forbidden: maximum nvidia.com/gpu usage per Container is 16, but limit is 17'


@pytest.mark.parametrize("status, message, by", [
    (403, RBAC, "RBAC"),
    (403, POLICY, "ValidatingAdmissionPolicy fairgpu-tenant-gpu-pods"),
    (403, QUOTA, "ResourceQuota fairgpu-gpu-quota"),
    (403, LIMIT, "LimitRange"),
    (422, "Job.batch \"x\" is invalid", "API server"),
])
def test_refusal_names_who_refused(status, message, by):
    assert isolation.refusal(status, message) == {"status": status, "by": by, "message": message}


def test_refused_check_passes_only_when_all_are_refused_by_the_right_one():
    rbac = isolation.refusal(403, RBAC)
    passed = isolation.refused_check("3. write X", {"create X": rbac, "delete X": rbac}, "RBAC")
    assert passed["passed"] and passed["expected"] == "RBAC refuses create X, delete X"
    assert passed["observed"].startswith("2 of 2 refused by RBAC, e.g. pods is forbidden")
    leak = isolation.refused_check("3. write X", {"create X": rbac, "delete X": None}, "RBAC")
    assert not leak["passed"] and leak["observed"] == "accepted: delete X"
    wrong = isolation.refused_check("6. past Kueue", {"create Pod": isolation.refusal(403, POLICY)},
                                    "ResourceQuota fairgpu-gpu-quota")
    assert not wrong["passed"]
    assert wrong["observed"] == "refused otherwise: create Pod (403 ValidatingAdmissionPolicy fairgpu-tenant-gpu-pods)"


CLASSES = [{"name": "low", "value": 100}, {"name": "normal", "value": 1000}, {"name": "high", "value": 10000}]


def test_priority_classes_to_try():
    assert isolation.highest_class(["low", "normal"], CLASSES) == "normal"
    assert isolation.highest_class([], CLASSES) is None
    assert isolation.forbidden_class(["low", "normal"], CLASSES) == "high"
    assert isolation.forbidden_class(["low", "normal", "high"], CLASSES) == "fairgpu-probe-not-a-class"


@pytest.mark.parametrize("maximum", [0, 1, 2, 15, 16])
def test_over_quota_split_fits_a_container_but_not_the_quota(maximum):
    per = isolation.over_quota_split(maximum)
    assert 2 * per > maximum and (per <= maximum or maximum == 0)


def test_probe_job_shape():
    job = isolation.probe_job("jump", "team-a", "nvidia.com/mig-2g.20gb", pods=9, queue="team-a-queue",
                              seconds=600, priority_class="normal")
    assert job["metadata"]["name"] == "fairgpu-probe-jump"
    assert job["metadata"]["labels"] == {"fairgpu.io/probe": "isolation", "kueue.x-k8s.io/queue-name": "team-a-queue",
                                         "kueue.x-k8s.io/priority-class": "normal"}
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 9
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/mig-2g.20gb"] == "1"
    assert job["spec"]["template"]["metadata"]["annotations"]["pod-complete.stage.kwok.x-k8s.io/delay"] == "600s"
    forged = isolation.bare_pod("past", "team-a", "nvidia.com/gpu", per_container=9, containers=2, owner_uid="u")
    assert forged["metadata"]["ownerReferences"][0]["controller"] is True
    assert [c["resources"]["limits"]["nvidia.com/gpu"] for c in forged["spec"]["containers"]] == ["9", "9"]


def test_workload_conditions():
    pending = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]}}
    assert isolation.quota_reserved(pending)["reason"] == "Pending"
    assert isolation.quota_reserved({}) is None


def test_device_door_jobs_are_valid_objects_each_reaching_for_the_node():
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.isolation import device_door_jobs
    from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.spec import is_dns_label
    jobs = device_door_jobs("team-a", "nvidia.com/gpu", 30)
    assert len(jobs) == 13
    for route, job in jobs.items():
        assert is_dns_label(job["metadata"]["name"]), route
        spec = job["spec"]["template"]["spec"]
        assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "0"
    assert jobs["terminationGracePeriodSeconds 31"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 31
    assert jobs["NVIDIA_VISIBLE_DEVICES=all"]["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    annotations = jobs["CDI device annotation"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["nvidia.cdi.k8s.io/container.probe"] == "nvidia.com/gpu=all"
    claim = jobs["a DRA resource claim"]["spec"]["template"]["spec"]
    assert claim["resourceClaims"][0]["name"] == claim["containers"][0]["resources"]["claims"][0]["name"] == "gpu"
    init = jobs["NVIDIA_VISIBLE_DEVICES in an init container"]["spec"]["template"]["spec"]["initContainers"][0]
    assert init["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}] and init["name"] == "init"
