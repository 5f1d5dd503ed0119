"""Path mig on the integration cluster: a bad MIG layout is refused before any node is labelled; site.yml -e
path=mig partitions every GPU into two 2g.20gb MIG devices through the (simulated) MIG manager, gives the
tenants quotas of them, runs a second time with no change, and validate.yml -e path=mig passes with every scenario
of the path (what molecule's mig scenario verifies, on this shared cluster)."""

import json
import os

import pytest

from conftest import ROOT, playbook

MIG = "nvidia.com/mig-2g.20gb"


def node_state(core):
    """What a playbook could write on each node: labels, annotations, spec, capacity and allocatable. Not the
    resourceVersion: kwok's lease heartbeat stage rewrites every node's conditions and addresses every 600 to
    610 s (stage node-heartbeat-with-lease of sigs.k8s.io/kwok v0.8.0: delay 600000 ms, jitter 610000 ms), which moved
    both nodes' resourceVersions in the middle of this test in a CI run while nothing of fairgpu's touched them."""
    return sorted((n.metadata.name, n.metadata.labels, n.metadata.annotations, n.spec.to_dict(),
                   n.status.capacity, n.status.allocatable) for n in core.list_node().items)


@pytest.mark.parametrize("layout, message", [
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"0": {"gi-profile": "2g.20gb"}}}],
     "mig-configs.bad[0].mig-devices"),
    ([{"devices": 7, "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}], "mig-configs.bad[0].devices"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 2}}],
     "NVIDIA-H100-80GB-HBM3 does not offer MIG profile '2g.10gb'"),
    ([{"devices": [8], "mig-enabled": True, "mig-devices": {"2g.20gb": 2}}], "mig-configs.bad[0].devices"),
    ([{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}], "mig-configs.bad"),
])
def test_bad_layout_labels_no_node(core, layout, message):
    before = node_state(core)
    run = playbook("site.yml", "-e", json.dumps({"path": "mig", "mig_config_layouts": {"bad": layout},
                                                 "mig_config_selected": "bad"}))
    assert run.rc != 0
    assert "node gpu-node-0 (8 x NVIDIA-H100-80GB-HBM3): " in run.messages() and message in run.messages()
    assert node_state(core) == before


def test_site_on_path_mig(core, kueue):
    run = playbook("site.yml", "-e", "path=mig")
    assert run.rc == 0, run.messages()
    for node in core.list_node(label_selector="nvidia.com/gpu.present=true").items:
        labels = node.metadata.labels
        assert labels["nvidia.com/mig.config"] == "fairgpu-2x2g.20gb"
        assert labels["nvidia.com/mig.config.state"] == "success"
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        assert labels[MIG + ".count"] == "16" and labels[MIG + ".product"] == "NVIDIA-H100-80GB-HBM3-MIG-2g.20gb"
        assert node.status.allocatable[MIG] == "16" and node.status.allocatable["nvidia.com/gpu"] == "0"
        smi = json.loads(node.metadata.annotations["fairgpu.io/simulated-nvidia-smi"])
        assert smi["-L"].count("MIG 2g.20gb") == 16
    config = core.read_namespaced_config_map("fairgpu-mig-parted-config", "gpu-operator")
    assert "fairgpu-2x2g.20gb:" in config.data["config.yaml"] and "version: v1" in config.data["config.yaml"]
    quota = core.read_namespaced_resource_quota("fairgpu-gpu-quota", "team-a")
    assert quota.spec.hard == {"requests." + MIG: "16", "pods": "200", "count/jobs.batch": "100", "count/configmaps": "100",
                               "count/secrets": "100", "services": "100", "persistentvolumeclaims": "100"}
    cq = kueue.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a")
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", MIG, "pods"]

    again = playbook("site.yml", "-e", "path=mig")
    assert again.rc == 0 and again.stats["changed"] == 0, again.changed_tasks()


def test_validate_on_path_mig(cluster):
    """validate.yml with path mig's default scenarios (baseline, mig, isolation, noisy_neighbour), as `molecule test -s mig`
    verifies with the same shorter Jobs; that scenario is `make molecule-mig`, not part of `make test`, since this
    test runs the same playbooks on the shared cluster (docs/testing.md "Tests")."""
    run = playbook("validate.yml", "-e", json.dumps({"path": "mig", "validate_baseline_seconds": 5,
                                                     "validate_mig_seconds": 10}))
    assert run.rc == 0, run.messages()
    with open(os.path.join(ROOT, "results", "integration", "report.json")) as handle:
        report = json.load(handle)
    assert [s["name"] for s in report["scenarios"]] == ["baseline", "mig", "isolation", "noisy_neighbour"]
    for scenario in report["scenarios"][:3]:
        assert scenario["checks"] and all(c["passed"] for c in scenario["checks"]), scenario["name"]
    # On simulated GPUs the noisy neighbour measures nothing, passes nothing and says why.
    noisy = report["scenarios"][3]
    assert noisy["checks"] == [] and noisy["notes"][0].startswith("Not measured: the GPUs are simulated"), noisy
    scenario = next(s for s in report["scenarios"] if s["name"] == "mig")
    assert len(scenario["checks"]) == 6
    waiting = next(c for c in scenario["checks"] if "above its quota" in c["check"])
    assert "insufficient unused quota for nvidia.com/mig-2g.20gb" in waiting["observed"]
