#!/usr/bin/env python3
"""fairgpu's benchmark (not a test): how long the playbooks take on the embedded cluster, against
`kubectl apply --server-side` of the same objects in the same run, and the time-to-guarantee of the flood test.

Runs on a cluster of its own (fairgpu-bench, its own Kueue ports), which it creates and removes. Prints a
Markdown table (median, min and max of several runs) for the README. Usage: make bench [BENCH_RUNS=5]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.webhooks import local_webhook_configurations  # noqa: E402
from ansible_collections.fairgpu.tenancy.plugins.module_utils.tenants.plan import tenant_plan  # noqa: E402

BIN = os.path.dirname(sys.executable)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
VARS = {"cluster_name": "fairgpu-bench", "kueue_local_webhook_port": 49443, "kueue_local_metrics_port": 48443,
        "kueue_local_health_port": 48081, "validate_results_dir": os.path.join(ROOT, "results", "bench")}
KUBECONFIG = os.path.expanduser("~/.local/share/fairgpu/kwok/clusters/fairgpu-bench/kubeconfig.yaml")
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))


def run(cmd, check=True):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        sys.exit("failed: %s\n%s\n%s" % (" ".join(cmd), proc.stdout[-3000:], proc.stderr[-3000:]))
    return elapsed, proc


def playbook(name, *extra):
    return [os.path.join(BIN, "ansible-playbook"), "playbooks/" + name, "-e", json.dumps(VARS)] + list(extra)


def timed(cmd, runs=RUNS):
    return [run(cmd)[0] for _ in range(runs)]


def toolchain():
    out = subprocess.run(["bash", "files/toolchain/toolchain.sh", "manifest"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def same_objects(tc, directory):
    """Write what site.yml applies with server-side apply (Kueue CRDs and webhooks, tenants) as plain files."""
    kubectl = tc["binaries"]["kubectl"]
    nodes = json.loads(subprocess.run([kubectl, "--kubeconfig", KUBECONFIG, "get", "nodes", "-o", "json"],
                                      capture_output=True, text=True, check=True).stdout)["items"]
    with open(os.path.join(ROOT, "inventories/local/group_vars/gpu_clusters.yml")) as handle:
        tenants = yaml.safe_load(handle)["tenants_list"]
    with open(os.path.join(tc["kueue_manifests"], "webhook.yaml")) as handle:
        upstream = list(yaml.safe_load_all(handle))
    live = json.loads(subprocess.run(
        [kubectl, "--kubeconfig", KUBECONFIG, "get", "mutatingwebhookconfiguration",
         "kueue-mutating-webhook-configuration", "-o", "json"], capture_output=True, text=True, check=True).stdout)
    ca = live["webhooks"][0]["clientConfig"]["caBundle"]
    objects = local_webhook_configurations(upstream, "127.0.0.1", VARS["kueue_local_webhook_port"], ca)
    objects += tenant_plan(tenants, nodes)["objects"]
    with open(os.path.join(directory, "objects.yaml"), "w") as handle:
        yaml.safe_dump_all(objects, handle)
    tenant_file = os.path.join(directory, "tenants.yaml")
    with open(tenant_file, "w") as handle:
        yaml.safe_dump_all(tenant_plan(tenants, nodes)["objects"], handle)
    crds = os.path.join(tc["kueue_manifests"], "crd")
    return [crds, os.path.join(directory, "objects.yaml")], tenant_file


def row(name, samples, baseline=None):
    med = statistics.median(samples)
    text = "| %s | %.2f | %.2f | %.2f |" % (name, med, min(samples), max(samples))
    if baseline:
        text += " %.1fx |" % (med / statistics.median(baseline))
    else:
        text += " |"
    return text


def main():
    tc = toolchain()
    kubectl = tc["binaries"]["kubectl"]
    run(playbook("teardown.yml"))
    fresh, _ = run(playbook("site.yml"))
    rerun = timed(playbook("site.yml"))
    tenants_rerun = timed(playbook("tenants.yml"))
    with tempfile.TemporaryDirectory() as directory:
        files, tenant_file = same_objects(tc, directory)
        apply = [kubectl, "--kubeconfig", KUBECONFIG, "apply", "--server-side", "--force-conflicts",
                 "--field-manager=fairgpu"]
        all_objects = timed(apply + sum((["-f", f] for f in files), []))
        tenant_objects = timed(apply + ["-f", tenant_file])
    validate, proc = run(playbook("validate.yml", "-e", '{"validate_scenarios": ["flood", "flood_reverse"]}'))
    with open(os.path.join(VARS["validate_results_dir"], "report.json")) as handle:
        report = json.load(handle)
    run(playbook("teardown.yml"))
    ttg = [s["metrics"]["time_to_guarantee_seconds"] for s in report["scenarios"]]

    print("Benchmark on %s (%d cores), %d runs each; seconds (whole process)\n" % (os.uname().nodename, os.cpu_count(), RUNS))
    print("| what | median | min | max | vs baseline |")
    print("|---|---|---|---|---|")
    print("| site.yml on a fresh embedded cluster (cluster, GPUs, Kueue, tenants; binaries cached) | %.2f | | | |" % fresh)
    print(row("site.yml re-run, nothing to change", rerun, all_objects))
    print(row("baseline: kubectl apply --server-side of the same objects (Kueue CRDs, webhooks, tenants)", all_objects))
    print(row("tenants.yml re-run, nothing to change", tenants_rerun, tenant_objects))
    print(row("baseline: kubectl apply --server-side of the tenants' objects", tenant_objects))
    print("| time-to-guarantee in the flood test (flood, flood_reverse) | %s | | | |" % ", ".join("%.1f" % t for t in ttg))
    print("| validate.yml, both flood scenarios | %.1f | | | |" % validate)


if __name__ == "__main__":
    main()
