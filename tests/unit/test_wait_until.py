"""Module fairgpu.tenancy.wait_until: each condition holds once the world it reads comes right while the module
waits (a fake client and Prometheus that change on the clock's sleeps), and when it does not, the module fails with
the caller's words, the timeout and the last state it saw."""

import json

from kubernetes.dynamic.exceptions import ConflictError, InternalServerError, NotFoundError

from ansible_collections.fairgpu.tenancy.plugins.modules import wait_until
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common import readiness
from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import prometheus as prometheus_api
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.prometheus import PrometheusError

from fake_clock import FakeClock

RULES = """groups:
- name: fairgpu
  rules:
  - alert: FairgpuTenantOverGuarantee
    expr: vector(1)
    for: 2m
  - alert: FairgpuKueueDown
    expr: vector(1)
"""


class Found(object):
    def __init__(self, value):
        self.value = value

    def to_dict(self):
        return self.value


class Error(Exception):
    pass


def answer(status, reason, message):
    """What kubernetes' dynamic client raises for an API server's answer (``status``, ``reason``, a Status body)."""
    return type("Answer", (), {"status": status, "reason": reason, "headers": {},
                               "body": '{"kind": "Status", "message": %s}' % json.dumps(message)})()


class FakeClient(object):
    """Nodes and Secrets as API dicts; ``refuse`` is what a dry-run create raises (None: admitted)."""

    def __init__(self, nodes=(), secrets=(), refuse=None):
        self.nodes, self.secrets, self.refuse, self.created = list(nodes), dict(secrets), refuse, []

    def resource(self, kind, api_version):
        return kind

    def get(self, kind, name=None, namespace=None, label_selector=None):
        if kind == "Node":
            wanted = [s for s in (label_selector or "").split(",") if s]
            return Found({"items": [n for n in self.nodes if all(s in n["metadata"]["labels"] for s in wanted)]})
        if kind == "Secret":
            if (namespace, name) not in self.secrets:
                raise NotFoundError(answer(404, "NotFound", "secrets %r not found" % name))
            return Found(self.secrets[(namespace, name)])
        return Found({"metadata": {"name": name}})

    def create(self, resource, definition, namespace=None, dry_run=None):
        assert dry_run == "All", "the probe is a dry run"
        self.created.append(definition["metadata"]["name"])
        if self.refuse is not None:
            raise self.refuse


def node(name, ready=True, allocatable=None, labels=None):
    return {"metadata": {"name": name, "labels": dict({"fairgpu.io/node-pool": "gpu"}, **(labels or {}))},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "allocatable": allocatable or {"cpu": "8"}}}


def params(condition, **given):
    base = dict(condition=condition, timeout=10, interval=2, fail_msg="it did not happen", label_selectors=[],
                names=None, resource="nvidia.com/gpu", namespace=None, name=None, key="token", definition=None,
                url=None, jobs=None, rules_text=None)
    base.update(given)
    return base


def run(condition, client, change=None, prometheus=None, **given):
    """The module's wait on a fake clock; ``change(now, client)`` runs after each sleep."""
    clock = FakeClock()
    if change is not None:
        clock.on_sleep = lambda now: change(now - 1000.0, client)
    reader = wait_until.Reader(lambda: client, prometheus_factory=lambda url: prometheus)
    return wait_until.wait(params(condition, **given), reader, Waiter(clock.monotonic, clock.sleep, clock.time))


def test_nodes_ready_waits_for_every_named_node_and_ignores_others():
    client = FakeClient([node("a"), node("b", ready=False), node("extra", ready=False)])

    def ready_b(elapsed, c):
        if elapsed >= 4:
            c.nodes[1] = node("b")
    ok, result = run("nodes_ready", client, ready_b, names=["a", "b"], label_selectors=["fairgpu.io/node-pool"])
    assert ok and result["elapsed"] == 4 and result["observed"] == "all Ready: a, b"
    assert [n["metadata"]["name"] for n in result["resources"]] == ["a", "b", "extra"]


def test_nodes_ready_fails_with_the_nodes_not_ready_and_not_listed():
    ok, result = run("nodes_ready", FakeClient([node("a", ready=False)]), names=["a", "b"])
    assert not ok
    assert result["msg"] == "it did not happen within 10 s; last seen: not Ready: a; not listed: b"


def test_resource_advertised_needs_a_node_and_the_resource_on_each():
    empty = run("resource_advertised", FakeClient([]), label_selectors=["nvidia.com/gpu.present=true"])
    assert not empty[0] and empty[1]["observed"] == "no node matches the label selectors"
    client = FakeClient([node("a", allocatable={"nvidia.com/gpu": "8"}), node("b")])

    def advertise(elapsed, c):
        c.nodes[1] = node("b", allocatable={"nvidia.com/gpu": "8"})
    partial = run("resource_advertised", FakeClient(client.nodes))
    assert not partial[0] and partial[1]["observed"] == "nvidia.com/gpu not in status.allocatable of b"
    ok, result = run("resource_advertised", client, advertise)
    assert ok and result["elapsed"] == 2 and len(result["resources"]) == 2


def test_secret_key_waits_for_the_token_controller():
    client = FakeClient()

    def create_then_fill(elapsed, c):
        secret = {"metadata": {"name": "t"}, "data": {"token": "dG9rZW4=" if elapsed >= 4 else ""}}
        c.secrets[("ns", "t")] = secret
    ok, result = run("secret_key", client, create_then_fill, namespace="ns", name="t")
    assert ok and result["elapsed"] == 4 and result["resources"][0]["data"]["token"] == "dG9rZW4="
    missing = run("secret_key", FakeClient(), namespace="ns", name="t")
    assert missing[1]["resources"] == [] and missing[1]["observed"] == "the Secret does not exist"


def test_webhooks_admit_is_a_dry_run_until_admission_passes_and_an_existing_object_counts():
    definition = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "probe"}}
    message = 'Internal error occurred: failed calling webhook "mresourceflavor.kb.io": connection refused'
    refused = InternalServerError(answer(500, "Internal Server Error", message))
    client = FakeClient(refuse=refused)

    def webhook_up(elapsed, c):
        if elapsed >= 6:
            c.refuse = None
    ok, result = run("webhooks_admit", client, webhook_up, definition=definition)
    assert ok and result["elapsed"] == 6 and client.created == ["probe"] * 4
    down = run("webhooks_admit", FakeClient(refuse=refused), definition=definition)
    assert down[1]["msg"] == ('it did not happen within 10 s; last seen: 500 Internal Server Error: Internal error '
                              'occurred: failed calling webhook "mresourceflavor.kb.io": connection refused')
    exists = run("webhooks_admit", FakeClient(refuse=ConflictError(answer(409, "Conflict", "already exists"))),
                 definition=definition)
    assert exists[0]


def test_api_answers_makes_the_client_afresh_until_it_answers():
    made = []

    def factory():
        made.append(1)
        if len(made) < 3:
            raise Error("Max retries exceeded with url: /version (Connection refused)")
        return FakeClient()
    clock = FakeClock()
    ok, result = wait_until.wait(params("api_answers"), wait_until.Reader(factory),
                                 Waiter(clock.monotonic, clock.sleep, clock.time))
    assert ok and len(made) == 3 and result["elapsed"] == 4 and result["observed"] == "answered"

    def refused():
        raise Error("Connection refused")
    failed = wait_until.wait(params("api_answers", timeout=4, fail_msg="the API server did not answer"),
                             wait_until.Reader(refused), Waiter(clock.monotonic, clock.sleep, clock.time))
    assert failed[1]["msg"] == "the API server did not answer within 4 s; last seen: Connection refused"


class FakePrometheus(object):
    def __init__(self):
        self.targets_up, self.loaded, self.down = set(), False, False

    def targets(self):
        if self.down:
            raise PrometheusError("Prometheus at http://127.0.0.1:1/api/v1/targets: connection refused")
        return [{"labels": {"job": job}, "health": "up" if job in self.targets_up else "down",
                 "lastError": "" if job in self.targets_up else "connection refused"}
                for job in ("kueue", "nvidia-dcgm-exporter")]

    def rules(self):
        rules = [{"name": "FairgpuTenantOverGuarantee", "duration": 120}, {"name": "FairgpuKueueDown", "duration": 0}]
        return [{"name": "fairgpu", "rules": rules if self.loaded else rules[:1]}]


def test_prometheus_ready_needs_every_job_up_and_every_rule_with_its_for():
    server = FakePrometheus()

    def come_up(elapsed, _client):
        server.targets_up.add("kueue")
        if elapsed >= 6:
            server.targets_up.add("nvidia-dcgm-exporter")
            server.loaded = True
    ok, result = run("prometheus_ready", FakeClient(), come_up, prometheus=server, url="http://x",
                     jobs=["kueue", "nvidia-dcgm-exporter"], rules_text=RULES)
    assert ok and result["elapsed"] == 6
    half = FakePrometheus()
    half.targets_up.add("kueue")
    failed = run("prometheus_ready", FakeClient(), prometheus=half, url="http://x",
                 jobs=["kueue", "nvidia-dcgm-exporter"], rules_text=RULES)
    assert failed[1]["observed"] == ("targets: kueue up, nvidia-dcgm-exporter down (connection refused); "
                                     "alerting rules: FairgpuTenantOverGuarantee for 120s")
    half.down = True
    unreachable = run("prometheus_ready", FakeClient(), prometheus=half, url="http://x", jobs=["kueue"], rules_text=RULES)
    assert "connection refused" in unreachable[1]["msg"]


def test_prometheus_ready_counts_the_jobs_asked_for_and_no_other():
    # A MultiKueue manager federates its workers' Prometheus (job fairgpu-fleet): up or down, that job does not hold
    # back the wait for the manager's own jobs (its workers may come up in a later batch of the roll-out).
    targets = [{"labels": {"job": job}, "health": "up"} for job in ("kueue", "nvidia-dcgm-exporter")]
    groups = [{"name": "fairgpu", "rules": [{"name": "FairgpuKueueDown", "duration": 0}]}]
    jobs, alerts = ["kueue", "nvidia-dcgm-exporter"], {"FairgpuKueueDown": 0}
    for fleet in ("up", "down"):
        fleet_target = {"labels": {"job": "fairgpu-fleet"}, "health": fleet}
        held, _observed = prometheus_api.ready(targets + [fleet_target], groups, jobs, alerts)
        assert held, fleet
    held, _observed = prometheus_api.ready(targets[:1], groups, jobs, alerts)
    assert not held


def test_a_rule_with_another_for_is_not_the_rule_file_as_written():
    server = FakePrometheus()
    server.targets_up.update(["kueue", "nvidia-dcgm-exporter"])
    server.loaded = True
    ok, _result = run("prometheus_ready", FakeClient(), prometheus=server, url="http://x",
                      jobs=["kueue", "nvidia-dcgm-exporter"], rules_text=RULES.replace("for: 2m", "for: 5m"))
    assert not ok


def test_a_node_is_ready_only_when_its_ready_condition_is_true():
    unknown = node("a")
    unknown["status"]["conditions"][0]["status"] = "Unknown"
    bare = {"metadata": {"name": "c", "labels": {}}, "status": {}}
    held, observed = readiness.nodes_ready([node("b"), unknown, bare], ["a", "b", "c"])
    assert not held and observed == "not Ready: a, c"
