"""kueue_admission_info's wait (module run() on a fake cluster and a fake clock): every read is a timeline sample,
the wait ends at the first read that meets wait_for, and a timeout fails with the last state."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import kueue_admission_info
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import isolation

import fake_cluster
from fake_clock import FakeClock


class Ended(Exception):
    pass


class Module(object):
    def __init__(self, **params):
        self.params = dict(namespaces=["team-a", "team-b"], cluster_queues=[], resource="nvidia.com/gpu", workloads=True,
                           pods=True, gpu_pods=False, wait_for=None, wait_timeout=120, poll_interval=1)
        self.params.update(params)

    def exit_json(self, **result):
        raise Ended("exit", result)

    def fail_json(self, **result):
        raise Ended("fail", result)


def run(params, judge_after):
    """team-b submits its guarantee of 8 one-GPU Jobs, which Kueue admits after ``judge_after`` seconds."""
    clock = FakeClock()
    cluster = fake_cluster.FakeCluster(fake_cluster.tenants(), clock, judge_after=judge_after)
    as_b = cluster.client("fairgpu-probe@team-b", ["team-b"])
    for index in range(8):
        job = isolation.probe_job("b-%d" % index, "team-b", "nvidia.com/gpu", queue="team-b-queue", seconds=600)
        as_b.create(as_b.resource("Job", "batch/v1"), job, namespace="team-b")
    with pytest.raises(Ended) as ended:
        kueue_admission_info.run(Module(**params), cluster.client(), Waiter(clock.monotonic, clock.sleep, clock.time))
    return ended.value.args


def test_waits_until_the_guarantee_is_reserved_and_running():
    how, result = run({"wait_for": {"queue": "team-b", "running_at_least": 8}}, judge_after=3)
    assert how == "exit" and result["elapsed"] == 3.0
    assert [(s["t"], s["queues"]["team-b"]["reserved"], s["queues"]["team-b"]["running"]) for s in result["timeline"]] == [
        (0.0, 0, 0), (1.0, 0, 0), (2.0, 0, 0), (3.0, 8, 8)]
    assert result["queues"]["team-b"]["reserved"] == 8 and result["timeline"][-1]["ts"] == 1.7e9 + 1003.0


def test_a_timeout_fails_with_the_last_state_and_the_timeline():
    how, result = run({"wait_for": {"queue": "team-b", "reserved_at_least": 8}, "wait_timeout": 2}, judge_after=30)
    assert how == "fail" and result["msg"].startswith("Kueue did not reach") and result["msg"].endswith("within 2 s")
    assert result["elapsed"] == 2.0 and len(result["timeline"]) == 3 and result["queues"]["team-b"]["reserved"] == 0


def test_without_wait_for_it_reads_once():
    how, result = run({}, judge_after=0)
    assert how == "exit" and result["elapsed"] == 0.0 and result["timeline"] == []
    assert result["queues"]["team-b"]["reserved"] == 8
