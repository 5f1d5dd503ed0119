"""Every way of calling nvidia_smi_mig_info runs (issue 13, item 7): given outputs, a simulated node (its
annotation read through a stand-in API client), and running nvidia-smi on the host, here a stand-in script on
PATH that prints captured outputs. The outputs and command paths must run without the kubernetes library."""

import json
import os
import stat
import sys

import pytest

from ansible_collections.fairgpu.tenancy.plugins.modules import nvidia_smi_mig_info as module
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.node import NVIDIA_SMI_ANNOTATION
from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab.nvidia_smi import QUERY_GPU
from module_main import run_main
from test_nvidia_smi import fixture

OUTPUTS = {"-L": fixture("L-h100-pcie-3g-3x1g.txt"), "mig -lgi": fixture("mig-lgi-h100-pcie-3g-3x1g.txt")}


@pytest.fixture
def no_kubernetes(monkeypatch):
    """Import of the kubernetes library fails, as on a bare GPU host."""
    for name in list(sys.modules):
        if name == "kubernetes" or name.startswith("kubernetes."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes", None)


def test_given_outputs_without_kubernetes(capsys, no_kubernetes):
    result = run_main(module, {"outputs": OUTPUTS}, capsys)
    assert not result.get("failed"), result
    assert result["profile_counts"] == {"3g.40gb": 1, "1g.10gb": 3}
    assert result["resources"]["mixed"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 1,
                                            "nvidia.com/mig-1g.10gb": 3}


def test_given_a_real_nodes_outputs_with_the_full_table(capsys, no_kubernetes):
    """The module on five real outputs of one A100 (driver 580, test_nvidia_smi_captures.A100_580), the full
    nvidia-smi table among them: it returns the table and judges the layout from the node's own -lgip."""
    from test_nvidia_smi_captures import A100_580

    expected = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True,
                                                       "mig-devices": {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}}]}}
    result = run_main(module, {"outputs": A100_580, "expected_config": expected, "expected_name": "x"}, capsys)
    assert not result.get("failed"), result
    assert result["table"]["driver_version"] == "580.126.09" and len(result["table"]["mig_devices"]) == 4
    assert result["profiles_source"] == "node report" and result["matches"] is False
    assert result["resources"]["mixed"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-4g.20gb": 1,
                                            "nvidia.com/mig-1g.5gb": 1}


def stand_in(tmp_path, outputs, fail=()):
    """A stand-in nvidia-smi printing ``outputs[" ".join(argv)]``; the commands in ``fail`` exit 6 as
    `nvidia-smi mig -lgi` does on a GPU without MIG."""
    data = tmp_path / "outputs.json"
    data.write_text(json.dumps({"outputs": outputs, "fail": list(fail)}))
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text("#!%s\nimport json, sys\nd = json.load(open(%r))\nc = ' '.join(sys.argv[1:])\n"
                      "sys.stdout.write(d['outputs'].get(c, ''))\nsys.exit(6 if c in d['fail'] or c not in d['outputs'] else 0)\n"
                      % (sys.executable, str(data)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script.parent)


def test_running_nvidia_smi_on_path_without_kubernetes(tmp_path, capsys, monkeypatch, no_kubernetes):
    outputs = dict(OUTPUTS, **{"mig -lgip": fixture("mig-lgip-h100-pcie-r570-wide.txt"),
                               QUERY_GPU: "index, name, uuid, mig.mode.current, mig.mode.pending, memory.total [MiB]\n"
                                          "0, NVIDIA H100 PCIe, GPU-00000001-0000-4000-8000-000000000001, Enabled, "
                                          "Enabled, 81559 MiB\n"})
    monkeypatch.setenv("PATH", stand_in(tmp_path, outputs) + os.pathsep + os.environ["PATH"])
    result = run_main(module, {}, capsys)
    assert not result.get("failed"), result
    assert result["mig_enabled"] == [True]
    assert result["profiles_source"] == "node report"
    # mig -lci and -lgipp were not answered (exit 6, no output) and are left out.
    assert set(result["outputs"]) == set(outputs)


def test_running_nvidia_smi_on_a_gpu_without_mig(tmp_path, capsys, monkeypatch):
    outputs = {"-L": "GPU 0: NVIDIA L4 (UUID: GPU-00000001-0000-4000-8000-000000000001)\n",
               "mig -lgi": "No MIG-enabled devices found.\n", "mig -lci": "No MIG-enabled devices found.\n"}
    monkeypatch.setenv("PATH", stand_in(tmp_path, outputs, fail=("mig -lgi", "mig -lci")) + os.pathsep
                       + os.environ["PATH"])
    result = run_main(module, {}, capsys)
    assert not result.get("failed"), result
    assert result["product"] == "NVIDIA-L4" and result["layout"] == [None]
    assert result["resources"]["mixed"] == {"nvidia.com/gpu": 1}


def test_running_nvidia_smi_that_fails(tmp_path, capsys):
    bin_dir = stand_in(tmp_path, {}, fail=("-L",))
    result = run_main(module, {"nvidia_smi": os.path.join(bin_dir, "nvidia-smi")}, capsys)
    assert result["failed"] and "-L failed (rc 6)" in result["msg"]


def test_missing_nvidia_smi(tmp_path, capsys):
    result = run_main(module, {"nvidia_smi": str(tmp_path / "absent")}, capsys)
    assert result["failed"]


class FakeClient:
    def __init__(self, node):
        self.node = node

    def resource(self, kind, version):
        return (kind, version)

    def get(self, resource, name):
        node = self.node

        class Answer:
            def to_dict(self):
                return node
        return Answer()


def test_simulated_node(capsys, monkeypatch):
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client

    node = {"metadata": {"name": "gpu-node-0", "annotations": {NVIDIA_SMI_ANNOTATION: json.dumps(OUTPUTS)}}}
    monkeypatch.setattr(client, "get_api_client", lambda module: FakeClient(node))
    result = run_main(module, {"node": "gpu-node-0"}, capsys)
    assert not result.get("failed"), result
    assert result["outputs"] == OUTPUTS and result["profile_counts"] == {"3g.40gb": 1, "1g.10gb": 3}


def test_simulated_node_needs_kubernetes(capsys, no_kubernetes):
    result = run_main(module, {"node": "gpu-node-0"}, capsys)
    assert result["failed"] and "kubernetes" in result["msg"]


def test_unreadable_outputs_name_the_format(capsys):
    result = run_main(module, {"outputs": {"-L": "+----+\n| NVIDIA-SMI 550.40.07 |\n"}}, capsys)
    assert result["failed"] and "nvidia-smi -L" in result["msg"]
