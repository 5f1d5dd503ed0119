"""MultiKueue on three embedded clusters (inventories/multikueue-embedded, docs/multikueue.md): a manager whose real
Kueue v0.19.2 dispatches the tenants' Jobs to two workers, each with its own real Kueue and one node of 4 simulated
GPUs. What Kueue decided is read back from the clusters: the workers joined (MultiKueueCluster and the admission
check Active), a second site.yml changes nothing, a tenant's Job submitted on the manager runs on a worker and its
status comes back, a tenant's credentials create nothing on a worker, one tenant flooding the fleet does not keep
the other from its guarantee, and a worker that stops answering has its work dispatched to the other after
MultiKueue's workerLostTimeout (1m in the inventory; Kueue's default is 15m), the Job succeeding once. In `make test`
(lane 2, with the files that bring clusters of their own: ports 14xxx to 16xxx), or alone `make test-multikueue`
(about 10 min). The tests run in order and share the fleet."""

import json
import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from conftest import KWOK_WORKDIR, ROOT, condition, load_job, wait_until
from test_97_fleet import fleet_playbook
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.faults import ControlPlane

pytestmark = [pytest.mark.multikueue, pytest.mark.own_cluster]

INVENTORY = os.path.join(ROOT, "inventories", "multikueue-embedded")
MANAGER, WORKERS = "mk-manager", ("mk-worker-1", "mk-worker-2")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"


def host_vars(host):
    with open(os.path.join(INVENTORY, "host_vars", host + ".yml")) as handle:
        return yaml.safe_load(handle)


def cluster_name(host):
    return host_vars(host)["cluster_name"]


def api(host, user=None, groups=()):
    """An API client of ``host``'s cluster; with ``user``, every request impersonates that user and ``groups``."""
    made = k8s_config.new_client_from_config(
        config_file=os.path.join(KWOK_WORKDIR, "clusters", cluster_name(host), "kubeconfig.yaml"))
    if user:
        made.set_default_header("Impersonate-User", user)
        for group in groups:
            made.set_default_header("Impersonate-Group", group)
    return made


def custom(host):
    return k8s.CustomObjectsApi(api(host))


def active(obj):
    found = condition(obj, "Active")
    return bool(found) and found["status"] == "True"


def jobs_on(host, namespace, selector=None):
    return k8s.BatchV1Api(api(host)).list_namespaced_job(namespace, label_selector=selector).items


def reserved(host, queue):
    cq = custom(host).get_cluster_custom_object(*KUEUE, "clusterqueues", queue)
    return sum(int(r.get("total", 0)) for f in cq.get("status", {}).get("flavorsReservation", [])
               for r in f["resources"] if r["name"] == "nvidia.com/gpu")


def submit(host, tenant, name, gpus=1, seconds=30):
    """A Job of ``tenant`` (its group's credentials, impersonated) to its LocalQueue on ``host``."""
    job = load_job(name, tenant, queue=tenant + "-queue", gpus=gpus, seconds=seconds, labels={"mk-test": name})
    return k8s.BatchV1Api(api(host, "user-of-" + tenant, [tenant])).create_namespaced_job(tenant, job)


def clean(namespace):
    for host in (MANAGER,) + WORKERS:
        k8s.BatchV1Api(api(host)).delete_collection_namespaced_job(namespace, propagation_policy="Background")
    wait_until(lambda: all(not jobs_on(h, namespace) for h in (MANAGER,) + WORKERS), 120, 2, "no Job left in " + namespace)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    report = tmp_path_factory.mktemp("multikueue-report")
    try:
        run = fleet_playbook("site.yml", report, inventory=INVENTORY)
        assert run.rc == 0, run.messages()
        yield report
    finally:
        fleet_playbook("teardown.yml", report, inventory=INVENTORY)


def test_the_workers_are_joined_and_a_second_run_changes_nothing(fleet):
    manager = custom(MANAGER)
    for worker in WORKERS:
        assert active(manager.get_cluster_custom_object(*KUEUE, "multikueueclusters", worker))
    assert active(manager.get_cluster_custom_object(*KUEUE, "admissionchecks", "fairgpu-multikueue"))
    for tenant in ("team-a", "team-b"):
        queue = manager.get_cluster_custom_object(*KUEUE, "clusterqueues", tenant)
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "fairgpu-multikueue"}]}
        assert active(queue)
        # The fleet-wide guarantee: the sum of the workers' (2 + 2).
        quotas = {r["name"]: r["nominalQuota"] for f in queue["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]}
        assert quotas["nvidia.com/gpu"] == "4"
    # The token the manager holds is a bound one that expires, about 30 days from now.
    secret = k8s.CoreV1Api(api(MANAGER)).read_namespaced_secret("fairgpu-worker-" + WORKERS[0], "kueue-system")
    expires = float(secret.metadata.annotations["fairgpu.io/token-expires"])
    assert 29 * 86400 < expires - time.time() <= 30 * 86400
    # A second run issues no token and changes nothing.
    again = fleet_playbook("site.yml", fleet, inventory=INVENTORY)
    assert again.rc == 0, again.messages()
    assert again.changed_tasks() == []


def test_a_job_submitted_on_the_manager_runs_on_a_worker_and_its_status_comes_back(fleet):
    job = submit(MANAGER, "team-a", "mk-one", seconds=10)
    # Kueue's Job webhook hands the Job to MultiKueue; fairgpu's admission policy on the manager allows that value only.
    assert job.spec.managed_by == "kueue.x-k8s.io/multikueue"
    wait_until(lambda: (k8s.BatchV1Api(api(MANAGER)).read_namespaced_job("mk-one", "team-a").status.succeeded or 0) == 1,
               180, 2, "the manager's Job succeeded, as its worker's did")
    ran = [w for w in WORKERS if any(j.metadata.name == "mk-one" for j in jobs_on(w, "team-a"))]
    workload = next(w for w in custom(MANAGER).list_namespaced_custom_object(*KUEUE, "team-a", "workloads")["items"]
                    if w["metadata"]["ownerReferences"][0]["name"] == "mk-one")
    assert workload["status"]["clusterName"] in WORKERS
    # The worker's copy goes once the manager's Workload has finished (its status copied back).
    assert ran in ([], [workload["status"]["clusterName"]])
    clean("team-a")


def test_a_tenant_creates_nothing_on_a_worker(fleet):
    for worker in WORKERS:
        with pytest.raises(ApiException) as refused:
            submit(worker, "team-a", "mk-direct")
        message = json.loads(refused.value.body)["message"]
        assert refused.value.status == 403 and 'cannot create resource "jobs"' in message, message


def test_one_tenant_flooding_the_fleet_leaves_the_other_its_guarantee(fleet):
    for i in range(8):
        submit(MANAGER, "team-a", "mk-flood-%d" % i, seconds=600)
    wait_until(lambda: reserved(MANAGER, "team-a") == 8 and all(reserved(w, "team-a") == 4 for w in WORKERS), 240, 3,
               "team-a holding the fleet's 8 GPUs, 4 on each worker")
    started = time.time()
    for i in range(4):
        submit(MANAGER, "team-b", "mk-guaranteed-%d" % i, seconds=600)

    def running_on_workers():
        return sum(1 for w in WORKERS for j in jobs_on(w, "team-b") if (j.status.active or 0) + (j.status.ready or 0) > 0)

    wait_until(lambda: reserved(MANAGER, "team-b") == 4 and running_on_workers() == 4, 300, 3,
               "team-b's guarantee of 4 reserved on the manager and running on the workers")
    elapsed = time.time() - started
    assert reserved(MANAGER, "team-a") <= 4 and all(reserved(w, "team-a") + reserved(w, "team-b") <= 4 for w in WORKERS)
    print("team-b's guarantee running after %.0f s" % elapsed)
    clean("team-a")
    clean("team-b")


def test_a_lost_workers_job_runs_on_the_other_worker_once(fleet):
    """The worker stays away until the Job has finished elsewhere. Kueue v0.19.2 does not fence a worker that comes
    back sooner: seen here, the returning worker's old copy ran on to its end beside the new one, and copying its
    status to the manager's Job failed for good ("status.startTime: ... field is immutable for unsuspended job once
    set"), the manager's Job left active (docs/multikueue.md "A worker that comes back")."""
    submit(MANAGER, "team-a", "mk-lost", seconds=60)
    wait_until(lambda: any(j.status.active for w in WORKERS for j in jobs_on(w, "team-a")), 180, 2,
               "mk-lost running on a worker")
    first = next(w for w in WORKERS if jobs_on(w, "team-a"))
    other = next(w for w in WORKERS if w != first)
    toolchain = json.loads(subprocess.run(["bash", os.path.join(ROOT, "files", "lab", "toolchain", "toolchain.sh"),
                                           "manifest", "kwok"], capture_output=True, text=True, check=True).stdout)

    def answers():
        try:
            k8s.VersionApi(api(first)).get_code(_request_timeout=2)
            return True
        except Exception:  # noqa: BLE001 - any failure to answer is the point
            return False

    def manager_job():
        return k8s.BatchV1Api(api(MANAGER)).read_namespaced_job("mk-lost", "team-a")

    plane = ControlPlane(toolchain["binaries"]["kwokctl"], KWOK_WORKDIR, cluster_name(first), answers, Waiter())
    lost = time.time()
    plane.stop()
    try:
        # MultiKueue keeps the Workload on the lost worker for workerLostTimeout, then dispatches it again.
        wait_until(lambda: any(j.metadata.name == "mk-lost" and j.status.active for j in jobs_on(other, "team-a")),
                   240, 3, "mk-lost dispatched to %s" % other)
        assert time.time() - lost >= 55, "dispatched again before the 1m workerLostTimeout"
        wait_until(lambda: (manager_job().status.succeeded or 0) == 1, 240, 3, "mk-lost succeeded on %s" % other)
    finally:
        plane.start()
    workload = next(w for w in custom(MANAGER).list_namespaced_custom_object(*KUEUE, "team-a", "workloads")["items"]
                    if w["metadata"]["ownerReferences"][0]["name"] == "mk-lost")
    assert workload["status"]["clusterName"] == other
    # Back on line, the lost worker's copy is removed (the finished Workload's remote objects, or MultiKueue's garbage
    # collection every gcInterval, 1m) and the manager's Job stays as it ended: succeeded once, never failed.
    wait_until(lambda: not [j for j in jobs_on(first, "team-a") if (j.metadata.labels or {}).get(ORIGIN_LABEL)], 180, 5,
               "the lost worker's copy of mk-lost removed once it answered again")
    job = manager_job()
    assert (job.status.succeeded, job.status.failed or 0) == (1, 0)
    clean("team-a")
