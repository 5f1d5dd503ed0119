"""A fleet of three embedded clusters from one inventory (issue 16): inventories/fleet-embedded rolled out canary
first, a drift check, validation one cluster at a time, the fleet report, and the fault runs with a fourth host of
provider existing whose kubeconfig points at a closed port. Run by `make test-fleet` (about 7 minutes; not part of
`make test`). The tests run in order and share the fleet."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from conftest import ROOT, KWOK_WORKDIR, PlaybookRun

pytestmark = pytest.mark.fleet

INVENTORY = os.path.join(ROOT, "inventories", "fleet-embedded")
FLEET = ("fleet-a", "fleet-b", "fleet-c")


def host_vars(host):
    with open(os.path.join(INVENTORY, "host_vars", host + ".yml")) as handle:
        return yaml.safe_load(handle)


def kubeconfig(host):
    return os.path.join(KWOK_WORKDIR, "clusters", host_vars(host)["cluster_name"], "kubeconfig.yaml")


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fleet-report")


def fleet_playbook(name, report_dir, *args, inventory=INVENTORY, timeout=1800):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               FAIRGPU_FLEET_REPORT_DIR=str(report_dir))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
           os.path.join(ROOT, "playbooks", name)] + list(args)
    return PlaybookRun(subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True,
                                      timeout=timeout))


def report(report_dir):
    with open(os.path.join(str(report_dir), "report.json")) as handle:
        return json.load(handle)["hosts"]


def play_hosts(run, name):
    """The hosts of each play entry named ``name``, in order: with serial, one entry per batch."""
    return [sorted(set(host for task in play["tasks"] for host in task["hosts"]))
            for play in run.result.get("plays", []) if play["play"]["name"] == name]


ROLL_OUT = "Set up multi-tenant GPU scheduling"


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A kubeconfig whose API server is a closed port: with a local connection that is a failed task."""
    path = tmp_path_factory.mktemp("broken") / "kubeconfig.yaml"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "closed",
        "clusters": [{"name": "closed", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "closed", "context": {"cluster": "closed", "user": "closed"}}],
        "users": [{"name": "closed", "user": {"token": "x"}}]}))
    return {"cluster_provider": "existing", "cluster_kubeconfig": str(path), "cluster_api_timeout": 4}


def one_file_inventory(tmp_path, order, broken):
    """The fleet inventory in one file with the hosts in ``order`` (host "broken" is the existing cluster)."""
    with open(os.path.join(INVENTORY, "group_vars", "gpu_clusters.yml")) as handle:
        group = yaml.safe_load(handle)
    with open(os.path.join(INVENTORY, "hosts.yml")) as handle:
        group.update(yaml.safe_load(handle)["gpu_clusters"]["vars"])
    hosts = dict((host, broken if host == "broken" else host_vars(host)) for host in order)
    path = tmp_path / "fleet.yml"
    path.write_text(yaml.safe_dump({"gpu_clusters": {"vars": group, "hosts": hosts}}, sort_keys=False))
    return path


def test_rollout_goes_canary_first_and_the_report_lists_every_cluster(report_dir):
    run = fleet_playbook("site.yml", report_dir, "-e", json.dumps({"fleet_serial": [1, "100%"]}))
    assert run.rc == 0, run.messages()
    assert play_hosts(run, "Check every cluster of the inventory before any is touched") == [list(FLEET)]
    assert play_hosts(run, ROLL_OUT) == [["fleet-a"], ["fleet-b", "fleet-c"]], "the canary, then the rest"
    rows = report(report_dir)
    assert sorted(rows) == list(FLEET)
    assert [rows[h]["path"] for h in FLEET] == ["kueue", "kueue", "mig"]
    assert rows["fleet-a"]["tenants"] == ["team-a 8 nvidia.com/gpu", "team-b 8 nvidia.com/gpu"]
    assert rows["fleet-b"]["tenants"] == ["research 4 nvidia.com/gpu", "product 2 nvidia.com/gpu",
                                          "interns 2 nvidia.com/gpu"]
    assert rows["fleet-c"]["tenants"] == ["team-a 8 nvidia.com/mig-2g.20gb", "team-b 8 nvidia.com/mig-2g.20gb"]
    assert all(rows[h]["provider"] == "kwok" and rows[h]["kueue_version"] == "v0.19.2" and rows[h]["changed"]
               and rows[h]["failure"] is None for h in FLEET)
    # Each cluster is its own: its own API server holds its own tenants only.
    for host, expected in (("fleet-a", {"team-a", "team-b"}), ("fleet-b", {"research", "product", "interns"}),
                           ("fleet-c", {"team-a", "team-b"})):
        api = k8s_config.new_client_from_config(config_file=kubeconfig(host))
        queues = k8s.CustomObjectsApi(api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
        assert {q["metadata"]["name"] for q in queues["items"]} == expected, host
        nodes = k8s.CoreV1Api(api).list_node().items
        assert len(nodes) == (2 if host == "fleet-a" else 1), host


def test_drift_check_lists_what_differs_per_cluster(tmp_path, report_dir, broken):
    """site.yml --check --diff over the fleet after fleet-b's inventory changed, with a canary whose API server does
    not answer: every cluster is checked all the same (a roll-out would stop at that canary), the canary is "not
    checked" with the reason, and only fleet-b would change."""
    inventory = one_file_inventory(tmp_path, ["broken"] + list(FLEET), broken)
    data = yaml.safe_load(inventory.read_text())
    data["gpu_clusters"]["hosts"]["fleet-b"]["tenants_list"][1]["gpus"] = 1
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    run = fleet_playbook("site.yml", report_dir, "--check", "--diff", "-e",
                         json.dumps({"fleet_serial": [1, "100%"], "fleet_max_fail_percentage": 0}), inventory=inventory)
    assert run.rc != 0, "the canary failed"
    assert play_hosts(run, ROLL_OUT) == [["broken"] + list(FLEET)], "one batch: every cluster checked"
    rows = report(report_dir)
    assert "cluster_kubeconfig: the API server of %s" % broken["cluster_kubeconfig"] in rows["broken"]["not_checked"]
    assert all(rows[h]["not_checked"] is None and rows[h]["failure"] is None for h in FLEET), "all checked"
    assert rows["fleet-a"]["changed"] == [] and rows["fleet-c"]["changed"] == [], "as the inventory says"
    assert rows["fleet-b"]["check_mode"] and any("tenants" in task for task in rows["fleet-b"]["changed"])
    lines = [line for play in run.result["plays"] for task in play["tasks"]
             if "Say what differed from fairgpu's tenants" in task["task"]["name"]
             for host, result in task["hosts"].items() if not result.get("skipped") for line in result["msg"]]
    assert [line for line in lines if re.match(r'ClusterQueue/product spec\.resourceGroups\[0\]\..*'
                                               r'\[name=nvidia\.com/gpu\]\.nominalQuota: live "?2"?, fairgpu "?1"?$', line)], lines
    markdown = open(os.path.join(str(report_dir), "report.md")).read()
    assert "| fleet-a | kwok | kueue | v0.19.2 | team-a 8 nvidia.com/gpu, team-b 8 nvidia.com/gpu | nothing |" in markdown
    assert "| fleet-b | kwok | kueue | v0.19.2 | research 4 nvidia.com/gpu, product 1 nvidia.com/gpu" in markdown
    assert "would change" in markdown
    assert "| broken | existing |" in markdown and "| not checked |" in markdown
    # Kept for docs/fleet.md's sample of a fleet report.
    os.makedirs(os.path.join(ROOT, "results", "fleet-embedded"), exist_ok=True)
    with open(os.path.join(ROOT, "results", "fleet-embedded", "drift-report.md"), "w") as handle:
        handle.write(markdown)


def test_validation_runs_one_cluster_at_a_time_and_reports_each(report_dir):
    run = fleet_playbook("validate.yml", report_dir, "-e", json.dumps({"validate_scenarios": ["baseline"]}))
    assert run.rc == 0, run.messages()
    assert play_hosts(run, "Validate tenant isolation") == [["fleet-a"], ["fleet-b"], ["fleet-c"]]
    rows = report(report_dir)
    assert [rows[h]["validation"] for h in FLEET] == ["passed"] * 3
    assert all(os.path.isfile(rows[h]["report"]) for h in FLEET)


def test_a_failing_canary_stops_the_roll_out_before_any_other_cluster(tmp_path, report_dir, broken):
    inventory = one_file_inventory(tmp_path, ["broken"] + list(FLEET), broken)
    run = fleet_playbook("site.yml", report_dir, "-e", json.dumps({"fleet_serial": [1, "100%"]}),
                         inventory=inventory)
    assert run.rc != 0
    assert play_hosts(run, ROLL_OUT) == [["broken"]], "no other cluster was reached"
    rows = report(report_dir)
    assert "cluster_kubeconfig: the API server of %s" % broken["cluster_kubeconfig"] in rows["broken"]["failure"]["message"]
    assert all(rows[h]["failure"]["task"] == "(not reached)" for h in FLEET), "checked, never rolled out"


def test_max_fail_percentage_lets_the_healthy_clusters_complete(tmp_path, report_dir, broken):
    inventory = one_file_inventory(tmp_path, ["fleet-a", "broken", "fleet-b", "fleet-c"], broken)
    run = fleet_playbook("site.yml", report_dir, "-e", json.dumps({"fleet_serial": [1, 2],
                                                                   "fleet_max_fail_percentage": 50}),
                         inventory=inventory)
    assert run.rc != 0
    assert play_hosts(run, ROLL_OUT) == [["fleet-a"], ["broken", "fleet-b"], ["fleet-c"]]
    rows = report(report_dir)
    assert rows["broken"]["failure"]["message"].startswith("cluster_kubeconfig: the API server of")
    assert all(rows[h]["failure"] is None for h in FLEET), "the healthy clusters completed"
    markdown = open(os.path.join(str(report_dir), "report.md")).read()
    assert "with a failure: broken." in markdown


def test_teardown_removes_the_embedded_clusters_and_leaves_the_existing_one(tmp_path, report_dir, broken):
    inventory = one_file_inventory(tmp_path, list(FLEET) + ["broken"], broken)
    before = open(broken["cluster_kubeconfig"]).read()
    run = fleet_playbook("teardown.yml", report_dir, inventory=inventory)
    assert run.rc != 0, "the existing cluster's host fails: without teardown_confirm it is only listed"
    for host in FLEET:
        assert not os.path.exists(os.path.dirname(kubeconfig(host))), host
    assert open(broken["cluster_kubeconfig"]).read() == before
    assert report(report_dir)["broken"]["failure"] is not None
