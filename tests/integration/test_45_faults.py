"""Faults on the shared cluster (issue 27; docs/failures.md). The validate role's kueue_restart scenario: team-a
holds every GPU it may reach, the local Kueue is killed with SIGKILL and kept down 30 s, team-b's Job created
meanwhile is refused by Kueue's webhook, Kueue is started again from its record, team-b gets its guarantee back by
preemption, every Job runs to the end once, Kueue's reserved GPUs match its admitted Workloads on every read, and
Prometheus fired FairgpuKueueDown (its for: is 10s in inventories/local). The prometheus_restart scenario: while
FairgpuTenantOverGuarantee fires for team-a, the local Prometheus is killed and started again 30 s later; the alert
fires again within three evaluations, with its for: state restored. The control_plane_restart scenario: while team-a
holds every GPU it may reach with its pods running, etcd and kube-apiserver are killed with SIGKILL and started again
by kwokctl 30 s later; every Workload keeps its admission, team-b's guarantee is reserved and running within the
bounds, no pod is evicted for its node, no Job lost or run twice. Then site.yml finds all three as it left them."""

import json
import os

from conftest import ROOT, playbook

REPORT = os.path.join(ROOT, "results", "integration", "report.json")


def test_kueue_prometheus_and_the_control_plane_killed_lose_nothing_and_the_next_site_run_changes_nothing(cluster):
    run = playbook("validate.yml", "-e", json.dumps({"validate_scenarios": ["kueue_restart", "prometheus_restart",
                                                                            "control_plane_restart"]}))
    assert run.rc == 0, run.messages()
    with open(REPORT) as handle:
        report = json.load(handle)
    scenario = next(s for s in report["scenarios"] if s["name"] == "kueue_restart")
    checks = {c["check"]: c for c in scenario["checks"]}
    assert all(c["passed"] for c in checks.values()), [c for c in checks.values() if not c["passed"]]
    refused = checks["a Job team-b created while Kueue was down"]["observed"]
    assert "failed calling webhook" in refused and "mjob.kb.io" in refused, refused
    fired = next(c for name, c in checks.items() if name.startswith("FairgpuKueueDown fired"))
    assert "firing" in fired["observed"], fired
    metrics = scenario["metrics"]
    assert metrics["jobs_lost"] == 0 and metrics["jobs_run_twice"] == 0 and metrics["down_seconds"] >= 30, metrics
    assert any("local process" in note for note in scenario["notes"]), scenario["notes"]
    restart = next(s for s in report["scenarios"] if s["name"] == "prometheus_restart")
    assert all(c["passed"] for c in restart["checks"]), restart["checks"]
    assert restart["metrics"]["refiring_seconds"] <= 15 < restart["metrics"]["alert_for_seconds"], restart["metrics"]
    control_plane = next(s for s in report["scenarios"] if s["name"] == "control_plane_restart")
    assert all(c["passed"] for c in control_plane["checks"]), [c for c in control_plane["checks"] if not c["passed"]]
    metrics = control_plane["metrics"]
    assert metrics["jobs_lost"] == 0 and metrics["jobs_run_twice"] == 0 and metrics["admissions_kept"] > 0, metrics
    # Kueue, Prometheus, etcd and the API server were started again exactly as site.yml started them: the next run
    # has nothing to do.
    again = playbook("site.yml")
    assert again.rc == 0, again.messages()
    assert again.changed_tasks() == [], again.changed_tasks()
