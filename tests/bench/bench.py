"""fairgpu's benchmark (not a test): how long the playbooks take on the embedded cluster, against
`kubectl apply --server-side` of the same objects in the same run and against Ansible's own floor (a one-task
playbook), and the time-to-guarantee of the flood test. The objects come from render.yml, the same resolver and
builders the roles use, never from reading inventory files.

Runs on a cluster of its own (fairgpu-bench, its own Kueue ports), which it creates and removes. Prints a
Markdown table (median, min and max of several runs) for docs/measurements.md. Usage: make bench [BENCH_RUNS=5] [BENCH_VALIDATE=0 skips the flood scenarios]
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

# Targets of issue 26, reported here and not asserted by a test: a no-change re-run of site.yml at most 6 times, and of
# tenants.yml at most 3 times, Ansible's floor plus kubectl apply --server-side of the same objects (medians of a run).
TARGET_SITE_RATIO = 6.0
TARGET_TENANTS_RATIO = 3.0
# Tasks that run on the controller without a module process (no module upload, no fresh Python): not counted as module
# calls in the no-change site.yml's census.
CONTROLLER_ACTIONS = {"ansible.builtin.debug", "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.fail",
                      "ansible.builtin.meta", "ansible.builtin.include_tasks", "ansible.builtin.import_tasks",
                      "ansible.builtin.include_role", "ansible.builtin.import_role", "fairgpu.tenancy.run_settings",
                      "ansible.builtin.validate_argument_spec", "ansible.builtin.set_stats",
                      "debug", "set_fact", "assert", "fail", "meta", "include_tasks", "include_role"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue.webhooks import local_webhook_configurations  # noqa: E402

BIN = os.path.dirname(sys.executable)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
VARS = {"cluster_name": "fairgpu-bench",
        "run_local_ports": {"kueue_webhook": 27443, "kueue_metrics": 27444, "kueue_health": 27081, "prometheus": 27090,
                            "dcgm_exporter": 27400, "kube_state_metrics": 27480, "kube_state_metrics_telemetry": 27490},
        "validate_results_dir": os.path.join(ROOT, "results", "bench")}
KUBECONFIG = os.path.expanduser("~/.local/share/fairgpu/kwok/clusters/fairgpu-bench/kubeconfig.yaml")
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))


def run(cmd, check=True):
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, check=False, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        sys.exit("failed: %s\n%s\n%s" % (" ".join(cmd), proc.stdout[-3000:], proc.stderr[-3000:]))
    return elapsed, proc


def playbook(name, *extra):
    return [os.path.join(BIN, "ansible-playbook"), "playbooks/" + name, "-e", json.dumps(VARS)] + list(extra)


def timed(cmd, runs=RUNS):
    return [run(cmd)[0] for _run in range(runs)]


def toolchain():
    out = subprocess.run(["bash", "files/lab/toolchain/toolchain.sh", "manifest"], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def same_objects(tc, directory):
    """What site.yml applies with server-side apply, as files for kubectl: Kueue's CRDs (its release manifests),
    its webhooks as the kueue role points them at the local process, and render.yml's tree (the tenants and the
    cluster-wide objects, from the same resolver and builders the roles use). Returns (site files, tenant tree)."""
    kubectl = tc["binaries"]["kubectl"]
    tree = os.path.join(directory, "rendered")
    run(playbook("render.yml", "-e", "render_output_dir=" + tree))
    with open(os.path.join(tc["kueue_manifests"], "webhook.yaml")) as handle:
        upstream = list(yaml.safe_load_all(handle))
    live = json.loads(subprocess.run(
        [kubectl, "--kubeconfig", KUBECONFIG, "get", "mutatingwebhookconfiguration",
         "kueue-mutating-webhook-configuration", "-o", "json"], capture_output=True, text=True, check=True).stdout)
    ca = live["webhooks"][0]["clientConfig"]["caBundle"]
    webhooks = os.path.join(directory, "webhooks.yaml")
    with open(webhooks, "w") as handle:
        yaml.safe_dump_all(local_webhook_configurations(upstream, "127.0.0.1", VARS["run_local_ports"]["kueue_webhook"], ca), handle)
    tenant_tree = os.path.join(tree, "embedded")
    # kubectl takes -f or -k, not both: the site baseline is two invocations, timed together.
    return ["-f", os.path.join(tc["kueue_manifests"], "crd"), "-f", webhooks], ["-k", tenant_tree]


def floor_playbook(directory):
    """Ansible's floor here: a playbook of one task that does nothing, on the same inventory."""
    path = os.path.join(directory, "floor.yml")
    with open(path, "w") as handle:
        yaml.safe_dump([{"name": "Floor", "hosts": "gpu_clusters", "gather_facts": False,
                         "tasks": [{"name": "Nothing", "ansible.builtin.meta": "noop"}]}], handle)
    return [os.path.join(BIN, "ansible-playbook"), path]


def row(name, samples, baseline=None):
    """A table row; ``baseline``: the seconds the ratio is taken against."""
    med = statistics.median(samples)
    text = "| %s | %.2f | %.2f | %.2f |" % (name, med, min(samples), max(samples))
    return text + (" %.1fx |" % (med / baseline) if baseline else " |")


def census(cmd):
    """The tasks a run executed (skipped ones aside) and how many of them ran a module (CONTROLLER_ACTIONS aside),
    from the JSON callback's output: ``(tasks, module calls, {action: count})``."""
    env = dict(ENV, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True)
    ran, actions = 0, {}
    for play in json.loads(proc.stdout).get("plays", []):
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if result.get("skipped"):
                    continue
                ran += 1
                action = result.get("action") or "?"
                if action not in CONTROLLER_ACTIONS:
                    actions[action] = actions.get(action, 0) + 1
    return ran, sum(actions.values()), actions


def main():
    tc = toolchain()
    kubectl = tc["binaries"]["kubectl"]
    run(playbook("teardown.yml"))
    fresh, _proc = run(playbook("site.yml"))
    rerun = timed(playbook("site.yml"))
    tenants_rerun = timed(playbook("tenants.yml"))
    site_tasks, site_modules, site_actions = census(playbook("site.yml"))
    with tempfile.TemporaryDirectory() as directory:
        site_files, tenant_files = same_objects(tc, directory)
        apply = [kubectl, "--kubeconfig", KUBECONFIG, "apply", "--server-side", "--force-conflicts",
                 "--field-manager=fairgpu"]
        tenant_objects = timed(apply + tenant_files)
        all_objects = [kueue + tenants for kueue, tenants in zip(timed(apply + site_files), tenant_objects)]
        floor = timed(floor_playbook(directory))
    validate, ttg, validate_note = None, [], ""
    if os.environ.get("BENCH_VALIDATE", "1") != "0":
        os.makedirs(VARS["validate_results_dir"], exist_ok=True)
        validate, proc = run(playbook("validate.yml", "-e", '{"validate_scenarios": ["flood", "flood_reverse"]}'), check=False)
        with open(os.path.join(VARS["validate_results_dir"], "validate.log"), "w") as handle:
            handle.write(proc.stdout + proc.stderr)
        if proc.returncode == 0:
            with open(os.path.join(VARS["validate_results_dir"], "report.json")) as handle:
                report = json.load(handle)
            ttg = [s["metrics"]["time_to_guarantee_seconds"] for s in report["scenarios"]]
        else:
            validate_note = "validate.yml failed (rc %d); its output: %s/validate.log" % (proc.returncode, VARS["validate_results_dir"])
    run(playbook("teardown.yml"))

    print("Benchmark on %s (%d cores), %d runs each; seconds (whole process)\n" % (os.uname().nodename, os.cpu_count(), RUNS))
    print("| what | median | min | max | vs baseline |")
    print("|---|---|---|---|---|")
    floor_med = statistics.median(floor)
    site_base = floor_med + statistics.median(all_objects)
    tenants_base = floor_med + statistics.median(tenant_objects)
    print("| site.yml on a fresh embedded cluster (cluster, GPUs, Kueue, tenants; binaries cached) | %.2f | | | |" % fresh)
    print(row("floor: ansible-playbook of one task that does nothing", floor))
    print(row("site.yml re-run, nothing to change (target %.0fx floor + apply)" % TARGET_SITE_RATIO, rerun, site_base))
    print(row("baseline: kubectl apply --server-side of the same objects (Kueue CRDs, webhooks, tenants)", all_objects))
    print(row("tenants.yml re-run, nothing to change (target %.0fx floor + apply)" % TARGET_TENANTS_RATIO, tenants_rerun,
              tenants_base))
    print(row("baseline: kubectl apply --server-side of the tenants' objects", tenant_objects))
    if ttg:
        print("| time-to-guarantee in the flood test (flood, flood_reverse) | %s | | | |" % ", ".join("%.1f" % t for t in ttg))
    if validate is not None:
        print("| validate.yml, both flood scenarios | %.1f | | | |" % validate)
    site_ratio, tenants_ratio = statistics.median(rerun) / site_base, statistics.median(tenants_rerun) / tenants_base
    print("\nsite.yml re-run %.1fx floor + apply (%.2f s): target %.0fx %s; tenants.yml re-run %.1fx (%.2f s): target %.0fx "
          "%s; floor %.2f s" % (site_ratio, statistics.median(rerun), TARGET_SITE_RATIO,
                                "met" if site_ratio <= TARGET_SITE_RATIO else "NOT met", tenants_ratio,
                                statistics.median(tenants_rerun), TARGET_TENANTS_RATIO,
                                "met" if tenants_ratio <= TARGET_TENANTS_RATIO else "NOT met", floor_med))
    print("A no-change site.yml ran %d tasks, %d of them module calls: %s" % (
        site_tasks, site_modules, ", ".join("%s %d" % (a, n) for a, n in sorted(site_actions.items(), key=lambda i: -i[1]))))
    if validate_note:
        print(validate_note)


if __name__ == "__main__":
    main()
