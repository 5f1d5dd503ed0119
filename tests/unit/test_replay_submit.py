"""The module replay_submit on a fake clock and a fake API: each Job is created at its time, not before; a Job
that exists is left alone without waiting; a Job too late fails naming the setting; check mode creates nothing."""

import pytest
from kubernetes.dynamic.exceptions import ConflictError

from fake_clock import FakeClock

from ansible_collections.fairgpu.tenancy.plugins.modules import replay_submit


class Done(Exception):
    pass


class Module(object):
    def __init__(self, params, check_mode=False):
        self.params = dict({"image": "busybox:1.37", "simulated": True, "resource": "nvidia.com/gpu",
                            "late_limit": 30, "run_id": "r"}, **params)
        self.check_mode, self.result = check_mode, None

    def exit_json(self, **result):
        self.result = dict(result, failed=False)
        raise Done()

    def fail_json(self, **result):
        self.result = dict(result, failed=True)
        raise Done()


class _Answer(object):
    status, reason, headers, data = 409, "Conflict", {}, b"{}"


class _List(object):
    def __init__(self, items):
        self.items = items

    def to_dict(self):
        return {"items": self.items}


class Client(object):
    def __init__(self, clock, existing=(), slow=0.0):
        self.clock, self.created, self.existing, self.slow = clock, [], set(existing), slow

    def resource(self, kind, api_version):
        return (kind, api_version)

    def get(self, resource, namespace=None, label_selector=None):
        return _List([{"metadata": {"namespace": ns, "name": name}} for ns, name in self.existing if ns == namespace])

    def create(self, resource, manifest, namespace=None):
        key = (namespace, manifest["metadata"]["name"])
        if key in self.existing:
            raise ConflictError(_Answer())
        self.clock.now += self.slow
        self.existing.add(key)
        self.created.append((manifest["metadata"]["name"], self.clock.now, manifest))


def jobs():
    return [{"name": "r-%04d" % n, "namespace": "t", "queue": "t-queue", "tenant": "t", "gpus": 1, "seconds": 30,
             "at": at, "trace_name": "x"} for n, at in enumerate([0, 0, 7, 20])]


def run(module, client, clock):
    with pytest.raises(Done):
        replay_submit.run(module, client, monotonic=clock.monotonic, sleep=clock.sleep, wall=clock.time)
    return module.result


def test_each_job_is_created_at_its_time():
    clock = FakeClock()
    client = Client(clock)
    result = run(Module({"jobs": jobs()}), client, clock)
    assert [(name, round(at - 1000.0, 3)) for name, at, _m in client.created] == \
        [("r-0000", 0), ("r-0001", 0), ("r-0002", 7), ("r-0003", 20)]
    assert result["changed"] is True and result["created"] == 4 and result["lateness"]["max"] == 0
    assert client.created[2][2]["spec"]["suspend"] is True
    assert max(clock.slept) <= 1.0, "never sleeps past a Job's time"


def test_a_second_run_leaves_every_job_alone_without_waiting():
    clock = FakeClock()
    client = Client(clock, existing=[("t", "r-%04d" % n) for n in range(4)])
    result = run(Module({"jobs": jobs()}), client, clock)
    assert result["changed"] is False and result["existing"] == 4 and client.created == []
    assert clock.slept == []


def test_a_job_too_late_fails_naming_the_setting():
    clock = FakeClock()
    result = run(Module({"jobs": jobs(), "late_limit": 5}), Client(clock, slow=6.0), clock)
    assert result["failed"] and "late_limit 5" in result["msg"] and "replay_compression" in result["msg"]


def test_check_mode_creates_nothing():
    clock = FakeClock()
    client = Client(clock)
    result = run(Module({"jobs": jobs()}, check_mode=True), client, clock)
    assert client.created == [] and len(result["submitted"]) == 4
