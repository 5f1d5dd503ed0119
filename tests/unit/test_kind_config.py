"""The kind provider's configuration (roles/cluster/templates/kind-config.yaml.j2), rendered without Docker."""

import os

import jinja2
import yaml

TEMPLATES = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "cluster", "templates")


def render(**variables):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined)
    env.filters["bool"] = lambda value: str(value).lower() in ("1", "true", "yes", "on")
    defaults = dict(ansible_managed="managed", run_settings={"cluster_name": "fairgpu"}, cluster_kind_node_image="kindest/node:v1.36.3",
                    cluster_kind_workers=2, cluster_gpu_passthrough=False)
    defaults.update(variables)
    return yaml.safe_load(env.get_template("kind-config.yaml.j2").render(**defaults))


def test_plain_cluster():
    config = render()
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker"]
    assert all("extraMounts" not in n for n in config["nodes"])


def test_gpu_passthrough_mounts_the_devices_into_workers_only():
    config = render(cluster_gpu_passthrough=True, cluster_kind_workers=1)
    control, worker = config["nodes"]
    assert "extraMounts" not in control
    assert worker["extraMounts"] == [{"hostPath": "/dev/null", "containerPath": "/var/run/nvidia-container-devices/all"}]
    assert worker["image"] == "kindest/node:v1.36.3"
