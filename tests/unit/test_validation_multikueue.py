"""The MultiKueue scenarios' judging (plugins/module_utils/validation/multikueue.py) and their table in the report: each
check fails on the outcome a wrong fleet gives, read as the clusters hold it. The scenarios themselves run against
three real Kueues in tests/integration/test_99_multikueue.py."""

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import validation_scenario
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import multikueue
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation.report import report_document, report_markdown

A = {"name": "team-a", "namespaces": ["team-a"], "gpu_resource": "nvidia.com/gpu", "gpus": 4, "borrowing_limit": 4,
     "lending_limit": 4, "max_gpus": 8, "weight": 1}
B = dict(A, name="team-b", namespaces=["team-b"])
WORKERS = ["mk-worker-1", "mk-worker-2"]


def nominal(**by_queue):
    return dict((name.replace("_", "-"), {"nominal": n}) for name, n in by_queue.items())


def test_the_guarantee_table_holds_the_manager_against_the_workers_sum():
    rows = multikueue.guarantee_rows([A, B], nominal(team_a=4, team_b=4),
                                     {"mk-worker-1": nominal(team_a=2, team_b=2), "mk-worker-2": nominal(team_a=2)},
                                     WORKERS)
    assert rows[0] == {"tenant": "team-a", "resource": "nvidia.com/gpu", "manager": 4,
                       "workers": {"mk-worker-1": 2, "mk-worker-2": 2}, "sum": 4}
    # team-b's ClusterQueue missing on mk-worker-2 counts 0: the manager then promises 2 GPUs no worker has.
    assert rows[1]["sum"] == 2
    checks = multikueue.guarantee_checks(rows)
    assert [c["passed"] for c in checks] == [True, False]
    assert checks[1]["check"] == "team-b's guarantee on the manager is the sum of its workers'"
    table = multikueue.guarantee_table(rows, WORKERS)
    assert table["header"] == ["tenant", "resource", "manager", "mk-worker-1", "mk-worker-2", "workers' sum"]
    assert table["rows"][1] == ["team-b", "nvidia.com/gpu", 4, 2, 0, 2]


def test_a_tenants_job_on_a_worker_must_be_refused_by_rbac():
    message = ('jobs.batch is forbidden: User "fairgpu-validate@team-a" cannot create resource "jobs" in API group '
               '"batch" in the namespace "team-a"')
    assert multikueue.refusal_check("mk-worker-1", "team-a", 403, message)["passed"]
    # Accepted (a Role left on the worker), or refused for another reason (an admission policy): not the route closed.
    assert not multikueue.refusal_check("mk-worker-1", "team-a", 201, "accepted")["passed"]
    assert not multikueue.refusal_check("mk-worker-1", "team-a", 403, "admission webhook denied the request")["passed"]


def test_a_job_on_two_workers_fails():
    assert multikueue.placements_check({"j-0": ["mk-worker-1"], "j-1": ["mk-worker-2"]}, "the flood")["passed"]
    twice = multikueue.placements_check({"j-0": ["mk-worker-1", "mk-worker-2"]}, "the flood")
    assert not twice["passed"] and twice["observed"] == "j-0 on mk-worker-1, mk-worker-2"


def test_every_cluster_must_be_in_the_managers_prometheus():
    clusters = ["fairgpu-mk-manager", "fairgpu-mk-worker-1", "fairgpu-mk-worker-2"]
    assert multikueue.fleet_series_check(clusters, clusters)["passed"]
    # A worker's federation down, or series without a cluster label (""), is a fleet the manager cannot see whole.
    assert not multikueue.fleet_series_check(["fairgpu-mk-manager", ""], clusters)["passed"]


def test_the_report_shows_the_fleets_table():
    rows = multikueue.guarantee_rows([A], nominal(team_a=4), {"mk-worker-1": nominal(team_a=2),
                                                              "mk-worker-2": nominal(team_a=2)}, WORKERS)
    scenario = {"name": "multikueue", "title": multikueue.TITLES["multikueue"], "metrics": {}, "timeline": [],
                "checks": multikueue.guarantee_checks(rows), "tables": [multikueue.guarantee_table(rows, WORKERS)]}
    page = report_markdown(report_document("mk-manager", [A], [scenario], "2026-12-07T00:00:00Z"), {})
    assert "| tenant | resource | manager | mk-worker-1 | mk-worker-2 | workers' sum |" in page
    assert "| team-a | nvidia.com/gpu | 4 | 2 | 2 | 4 |" in page


class Module(object):
    def __init__(self, given):
        self.given = given

    def fail_json(self, msg):
        raise AssertionError(msg)


@pytest.mark.parametrize("given, seconds", [({}, 900.0), ({"worker_lost_timeout": "1m"}, 60.0),
                                            ({"worker_lost_timeout": "1m30s"}, 90.0), ({"worker_lost_timeout": 45}, 45.0)])
def test_worker_lost_timeout_is_kueues_go_duration(given, seconds):
    assert validation_scenario.lost_timeout_seconds(Module(given), given) == seconds


def test_a_worker_lost_timeout_that_is_no_duration_is_refused():
    with pytest.raises(AssertionError, match="multikueue.worker_lost_timeout: '15' is not a positive Go duration"):
        validation_scenario.lost_timeout_seconds(Module({}), {"worker_lost_timeout": "15"})
