"""The embedded cluster: real scheduler decisions about simulated GPUs, and site.yml's idempotence."""

import uuid

from conftest import playbook, wait_until


def gpu_pod(name, gpus):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                                   "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def test_nodes_advertise_gpus_as_device_plugin_and_gfd_would(core):
    nodes = core.list_node(label_selector="nvidia.com/gpu.present=true").items
    assert len(nodes) == 2
    for node in nodes:
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert node.metadata.labels["nvidia.com/gpu.memory"] == "81559"
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def test_scheduler_places_a_gpu_pod_and_refuses_an_oversized_one(core):
    ns = "default"
    fits, too_big = "fits-%s" % uuid.uuid4().hex[:6], "too-big-%s" % uuid.uuid4().hex[:6]
    core.create_namespaced_pod(ns, gpu_pod(fits, 8))
    core.create_namespaced_pod(ns, gpu_pod(too_big, 9))
    try:
        def running():
            pod = core.read_namespaced_pod(fits, ns)
            return pod if pod.status.phase == "Running" else None

        pod = wait_until(running, 60, what="the 8-GPU pod to run")
        assert pod.spec.node_name.startswith("gpu-node-")

        def unschedulable():
            p = core.read_namespaced_pod(too_big, ns)
            cond = next((c for c in p.status.conditions or [] if c.type == "PodScheduled"), None)
            return cond if cond is not None and cond.reason == "Unschedulable" else None

        cond = wait_until(unschedulable, 60, what="the 9-GPU pod to be unschedulable")
        assert "Insufficient nvidia.com/gpu" in cond.message
        assert core.read_namespaced_pod(too_big, ns).status.phase == "Pending"
    finally:
        for name in (fits, too_big):
            core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_second_run_and_check_mode_change_nothing(cluster):
    import os

    from conftest import CLUSTER

    pidfile = os.path.expanduser("~/.local/share/fairgpu/kueue/%s/kueue.pid" % CLUSTER)
    with open(pidfile) as handle:
        pid = handle.read().strip()
    run = playbook("site.yml")
    assert run.rc == 0, run.messages()
    assert run.stats["changed"] == 0, run.changed_tasks()
    # Nothing Kueue reads changed, so the local Kueue process was not restarted (test_20: a change restarts it).
    with open(pidfile) as handle:
        assert handle.read().strip() == pid
    check = playbook("site.yml", check=True)
    assert check.rc == 0, check.messages()
    assert check.stats["changed"] == 0, check.changed_tasks()


def test_kwokctl_downloads_nothing(cluster, tmp_path):
    """kwokctl --dry-run prints every download it would make: with fairgpu's configuration, only local copies."""
    import json
    import os
    import subprocess

    from conftest import CLUSTER, KWOK_WORKDIR, ROOT

    tc = json.loads(subprocess.run(["bash", os.path.join(ROOT, "files/lab/toolchain/toolchain.sh"), "manifest"],
                                   capture_output=True, text=True, check=True).stdout)

    def dry_run(*args):
        out = subprocess.run([tc["binaries"]["kwokctl"], "--dry-run", "create", "cluster", "--name=dry", "--kubeconfig=",
                              *args], check=False, capture_output=True, text=True,
                             env=dict(os.environ, KWOK_WORKDIR=str(tmp_path)))
        return [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("# Download")]

    ours = dry_run("--config=%s/%s.kwokctl.yaml" % (KWOK_WORKDIR, CLUSTER))
    assert len(ours) == 5 and all(line.startswith("# Download /") for line in ours), ours
    # Without the configuration kwokctl would fetch release binaries: the check above can fail.
    assert any("https://" in line for line in dry_run("--runtime=binary"))
