"""Kueue's own scheduler performance baseline, in its shape, through fairgpu's embedded cluster (make bench-scale's
second part; issue 28 item 7). A benchmark, not a test.

Kueue's performance test (test/performance/scheduler of sigs.k8s.io/kueue at the pinned KUEUE_VERSION) makes its
objects from configs/baseline/generator.yaml and asserts configs/baseline/rangespec.yaml. This script reads both
from the pinned module in the Go module cache (`go mod download`; the toolchain's Kueue build fetched it), makes the
same objects on an embedded cluster that fairgpu's site.yml brings up, with fair sharing off (the test's
minimalkueue starts from an empty, undefaulted Configuration; fairgpu's Kueue is the real one, with its webhooks,
the batch/job integration and waitForPodsReady, which act on no bare Workload), plays the test runner's controller
(scale.Finisher) and computes the test's three measures as its recorder and checker do
(runner/recorder/recorder.go, checker/checker_test.go):

- wall time (ms): upstream, the lifetime of the minimalkueue process, started before the objects are generated and
  stopped once no ClusterQueue has pending or reserving Workloads; here, from the first object created to the last
  Workload finished. Bound: cmd.maxWallMs, at most.
- usage per ClusterQueue class (%): the time integral of the quota the class's ClusterQueues used (upstream from
  their status.flavorsUsage on each update; here each Workload's request over its admitted intervals, as this
  client saw them), over the sum of their nominal quotas times the same span as the wall time (upstream: from each
  ClusterQueue's first event to its last). Bound: clusterQueueClassesMinUsage, at least.
- average time to admission per Workload class (ms): from the Workload's first event (upstream the watch's; here
  its creation returning to this client, or the watch's if earlier: the watch alone undercounts a Workload first
  seen admitted, kubernetes-sigs/kueue#11870) to its latest admission (the recorder overwrites it on every
  admission, so an evicted Workload counts its last). Bound: wlClassesMaxAvgTimeToAdmissionMs, at most.

The objects, as runner/generator/generator.go makes them: a ResourceFlavor (config resourceFlavor, default "rf");
per cohort set, `count` cohorts named <className>-<i>; in each, per queue set, `count` ClusterQueues named
<className>-<set>-<i>-<cohort> with one resource, cpu, its nominalQuota and borrowingLimit, the set's
reclaimWithinCohort and withinClusterQueue, each with a namespace and a LocalQueue of its name; per ClusterQueue and
workload set one thread that waits creationIntervalMs and creates the next Workload (spec.priority, one pod set
of one pod asking `request` cpu, the running time in a label), count times. The Workloads have no pods.

Environment: KUEUE_BASELINE_CONFIG (default baseline: configs/<name>/ of the module), SCALE_TIMEOUT (seconds,
default 2400), SCALE_KEEP=1 (leave the cluster up). Writes results/bench-scale/baseline.json and baseline.md; exit
status 0 when nothing was lost (the bounds are reported, not enforced: upstream sets them for its CI machine).
"""

import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import threading
import time

import yaml
from kubernetes import client, config

import scale
from scale import GROUP, VERSION, BENCH_LABEL, Finisher, log, retried

CONFIG_NAME = os.environ.get("KUEUE_BASELINE_CONFIG", "baseline")
TIMEOUT = int(os.environ.get("SCALE_TIMEOUT", "2400"))
KEEP = os.environ.get("SCALE_KEEP", "0") == "1"
KUEUE_MODULE = "sigs.k8s.io/kueue"
SELECTOR = "%s=baseline" % BENCH_LABEL
# One kwok node and one tenant: site.yml needs them; the test's objects live beside them, in cohorts of their own.
VARS = dict(scale.VARS, kueue_fair_sharing=False,
            lab_cluster_node_pools=[{"name": "gpu-node", "count": 1, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                     "gpu_count": 8, "cpu": "96", "memory": "1Ti"}],
            tenants_list=[{"name": "tenant-00", "gpus": 8}])


def upstream_config(version, name=CONFIG_NAME):
    """(generator, rangespec, directory) of configs/<name>/ in the Kueue module at ``version``, from the Go module
    cache (downloaded through the module proxy when missing)."""
    out = subprocess.run(["go", "mod", "download", "-json", "%s@%s" % (KUEUE_MODULE, version)],
                         check=True, capture_output=True, text=True)
    directory = os.path.join(json.loads(out.stdout)["Dir"], "test", "performance", "scheduler", "configs", name)
    with open(os.path.join(directory, "generator.yaml")) as handle:
        generator = yaml.safe_load(handle)
    with open(os.path.join(directory, "rangespec.yaml")) as handle:
        rangespec = yaml.safe_load(handle)
    return generator, rangespec, directory


def plan(generator):
    """The generator's objects: {"flavor": name, "queues": [{name, cohort, className, nominalQuota,
    borrowingLimit, reclaimWithinCohort, withinClusterQueue, sets: [(set index, workloads set)]}]}, named as
    generator.go names them."""
    if generator.get("topology"):
        raise ValueError("a TAS config (topology) is not supported: its nodes and topology are not made here")
    flavor = (generator.get("resourceFlavor") or {}).get("name") or "rf"
    queues = []
    for cohort_set in generator["cohorts"]:
        for cohort_index in range(cohort_set["count"]):
            cohort = "%s-%d" % (cohort_set["className"], cohort_index)
            for set_index, queue_set in enumerate(cohort_set["queuesSets"]):
                for queue_index in range(queue_set["count"]):
                    queues.append({
                        "name": "%s-%d-%d-%s" % (queue_set["className"], set_index, queue_index, cohort),
                        "cohort": cohort, "className": queue_set["className"],
                        "nominalQuota": str(queue_set["nominalQuota"]),
                        "borrowingLimit": str(queue_set["borrowingLimit"]),
                        "reclaimWithinCohort": queue_set["reclaimWithinCohort"],
                        "withinClusterQueue": queue_set["withinClusterQueue"],
                        "sets": list(enumerate(queue_set["workloadsSets"]))})
    return {"flavor": flavor, "queues": queues}


def workload_count(planned):
    """How many Workloads the planned queues' workload sets create."""
    return sum(ws["count"] * len(ws["workloads"]) for q in planned["queues"] for _i, ws in q["sets"])


def queue_objects(queue, flavor):
    """ClusterQueue, Namespace and LocalQueue of one planned queue (kueue.x-k8s.io/v1beta2)."""
    labels = {BENCH_LABEL: "baseline", BENCH_LABEL + "-class": queue["className"]}
    cluster_queue = {
        "apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "ClusterQueue",
        "metadata": {"name": queue["name"], "labels": labels},
        "spec": {"cohortName": queue["cohort"], "namespaceSelector": {},
                 "preemption": {"reclaimWithinCohort": queue["reclaimWithinCohort"],
                                "withinClusterQueue": queue["withinClusterQueue"]},
                 "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [
                     {"name": "cpu", "nominalQuota": queue["nominalQuota"],
                      "borrowingLimit": queue["borrowingLimit"]}]}]}]}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue["name"], "labels": labels}}
    local_queue = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "LocalQueue",
                   "metadata": {"name": queue["name"], "namespace": queue["name"], "labels": labels},
                   "spec": {"clusterQueue": queue["name"]}}
    return cluster_queue, namespace, local_queue


def workload(queue, set_index, number, item, template):
    """The Workload generator.go's generateWlSet makes: <class>-<set>-<number>-<item>, one pod asking the request."""
    return {
        "apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Workload",
        "metadata": {"name": "%s-%d-%d-%d" % (template["className"], set_index, number, item),
                     "namespace": queue["name"],
                     "labels": {BENCH_LABEL: "baseline", BENCH_LABEL + "-class": template["className"],
                                BENCH_LABEL + "-runtime": str(template["runtimeMs"] / 1000.0),
                                BENCH_LABEL + "-request": str(template["request"])}},
        "spec": {"queueName": queue["name"], "priority": int(template.get("priority", 0)),
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                     "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox:1.37", "resources": {
                         "requests": {"cpu": str(template["request"])}}}]}}}]},
    }


def measures(queues, workloads, started, first_seen, last_admitted, intervals):
    """The test's measures from what the client saw (times: Unix seconds of this client's clock).

    ``queues``: the planned queues; ``workloads``: {(namespace, name): (class, request in cpu)} of the Workloads
    created; ``started``: when the first object was created; ``first_seen``, ``last_admitted``: {key: time};
    ``intervals``: {key: [(admitted, ended)]}. Returns {"wall_ms", "end", "queue_classes": {class: {"usage_percent",
    "nominal", "used_cpu_seconds"}}, "workload_classes": {class: {"count", "admitted", "avg_time_to_admission_ms"}}}
    where end is the last admitted interval's end (None: nothing ran)."""
    ends = [end for spans in intervals.values() for _start, end in spans]
    end = max(ends) if ends else None
    span = (end - started) if end is not None else 0.0
    queue_classes = {}
    for queue in queues:
        entry = queue_classes.setdefault(queue["className"], {"nominal": 0.0, "used_cpu_seconds": 0.0})
        entry["nominal"] += float(queue["nominalQuota"])
    class_of_namespace = {queue["name"]: queue["className"] for queue in queues}
    workload_classes = {}
    for key, (klass, request) in workloads.items():
        used = sum(end_ - start for start, end_ in intervals.get(key, ()))
        queue_classes[class_of_namespace[key[0]]]["used_cpu_seconds"] += request * used
        entry = workload_classes.setdefault(klass, {"count": 0, "admitted": 0, "total_ms": 0.0})
        entry["count"] += 1
        if key in last_admitted and key in first_seen:
            entry["admitted"] += 1
            entry["total_ms"] += (last_admitted[key] - first_seen[key]) * 1000.0
    for entry in queue_classes.values():
        entry["usage_percent"] = round(100.0 * entry["used_cpu_seconds"] / (entry["nominal"] * span), 1) \
            if span > 0 and entry["nominal"] else None
        entry["used_cpu_seconds"] = round(entry["used_cpu_seconds"], 1)
    for entry in workload_classes.values():
        # Upstream divides by every Workload of the class (a never admitted one counts 0 ms); fairgpu reports the
        # average over the admitted and counts the others apart (a lost Workload fails the run).
        entry["avg_time_to_admission_ms"] = round(entry.pop("total_ms") / entry["admitted"]) if entry["admitted"] else None
    return {"wall_ms": round(span * 1000.0) if end is not None else None, "end": end,
            "queue_classes": queue_classes, "workload_classes": workload_classes}


def judge(result, rangespec):
    """One row per bound of the range spec: {"measure", "observed", "bound", "passed"}; passed is None where
    nothing was observed."""
    rows = []
    wall = result["wall_ms"]
    bound = (rangespec.get("cmd") or {}).get("maxWallMs")
    if bound is not None:
        rows.append({"measure": "wall time (ms)", "observed": wall, "bound": "<= %d" % bound,
                     "passed": None if wall is None else wall <= bound})
    for klass, minimum in sorted((rangespec.get("clusterQueueClassesMinUsage") or {}).items()):
        usage = (result["queue_classes"].get(klass) or {}).get("usage_percent")
        rows.append({"measure": "usage of ClusterQueue class %s (%%)" % klass, "observed": usage,
                     "bound": ">= %s" % minimum, "passed": None if usage is None else usage >= minimum})
    for klass, maximum in sorted((rangespec.get("wlClassesMaxAvgTimeToAdmissionMs") or {}).items()):
        average = (result["workload_classes"].get(klass) or {}).get("avg_time_to_admission_ms")
        rows.append({"measure": "average time to admission, class %s (ms)" % klass, "observed": average,
                     "bound": "<= %d" % maximum, "passed": None if average is None else average <= maximum})
    return rows


def markdown(report):
    lines = ["Kueue's scheduler performance %s shape (%s, %s), through fairgpu's embedded cluster, %s, %s (%d cores)\n"
             % (CONFIG_NAME, report["kueue_version"], report["config_dir"], report["date"], os.uname().nodename,
                os.cpu_count()),
             "%d ClusterQueues in %d cohorts, %d Workloads: created %d, admitted %d, finished %d, lost %d; evictions %d\n"
             % (report["cluster_queues"], report["cohorts"], report["workloads"], report["created"],
                report["admitted"], report["finished"], report["lost"], report["evictions_seen"]),
             "| measure | fairgpu's embedded cluster | upstream's bound | within |", "|---|---|---|---|"]
    for row in report["checks"]:
        observed = "-" if row["observed"] is None else row["observed"]
        within = {True: "yes", False: "**no**", None: "-"}[row["passed"]]
        lines.append("| %s | %s | %s | %s |" % (row["measure"], observed, row["bound"], within))
    lines.append("\nCreating the Workloads took %s s (the config's creation intervals alone: %s s); Kueue's CPU time "
                 "over the run %s s; site.yml %.0f s" % (report.get("created_seconds"), report.get("paced_seconds"),
                                                         report.get("kueue_cpu_seconds"), report.get("site_seconds", 0.0)))
    return "\n".join(lines)


def kueue_cpu_seconds():
    """user + system CPU seconds of the local Kueue so far (/proc/<pid>/stat utime and stime), or None."""
    pid = scale.processes().get("kueue")
    if pid is None:
        return None
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run(custom, core, planned):
    """Create the objects as the generator does while scale.Finisher plays the runner; returns the report's
    figures."""
    finisher = Finisher(custom, SELECTOR, True)
    pool = concurrent.futures.ThreadPoolExecutor(16)
    for target, args in ((finisher.watch_loop, ()), (finisher.finish_loop, (pool,))):
        threading.Thread(target=target, args=args, daemon=True).start()
    created, created_at, failures, lock = {}, {}, [], threading.Lock()
    cpu_before = kueue_cpu_seconds()
    started = time.time()
    retried(lambda: custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
        "apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "ResourceFlavor",
        "metadata": {"name": planned["flavor"], "labels": {BENCH_LABEL: "baseline"}}, "spec": {}}))

    def one_set(queue, set_index, workloads_set):
        for number in range(workloads_set["count"]):
            for item, template in enumerate(workloads_set["workloads"]):
                time.sleep(workloads_set.get("creationIntervalMs", 0) / 1000.0)
                manifest = workload(queue, set_index, number, item, template)
                key = (queue["name"], manifest["metadata"]["name"])
                try:
                    retried(lambda m=manifest: custom.create_namespaced_custom_object(
                        GROUP, VERSION, queue["name"], "workloads", m))
                    with lock:
                        created[key] = (template["className"], float(template["request"]))
                        created_at[key] = time.time()
                except Exception as error:  # reported, and the Workload counted lost
                    with lock:
                        failures.append("%s/%s: %s" % (key[0], key[1], str(error)[:160]))

    def one_queue(queue):
        cluster_queue, namespace, local_queue = queue_objects(queue, planned["flavor"])
        retried(lambda: custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", cluster_queue))
        retried(lambda: core.create_namespace(namespace))
        retried(lambda: custom.create_namespaced_custom_object(GROUP, VERSION, queue["name"], "localqueues", local_queue))
        threads = [threading.Thread(target=one_set, args=(queue, index, workloads_set))
                   for index, workloads_set in queue["sets"]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    queue_threads = [threading.Thread(target=one_queue, args=(queue,)) for queue in planned["queues"]]
    for thread in queue_threads:
        thread.start()
    for thread in queue_threads:
        thread.join()
    created_seconds = time.time() - started
    expected = workload_count(planned)
    log("baseline: %d of %d Workloads created in %.1f s (%d failures)"
        % (len(created), expected, created_seconds, len(failures)))
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        with finisher.lock:
            done = len(finisher.finished & set(created))
        if done >= len(created):
            break
        log("baseline: %d of %d finished" % (done, len(created)))
        time.sleep(10)
    timed_out = time.monotonic() >= deadline
    finisher.stop.set()
    pool.shutdown(wait=True, cancel_futures=True)
    cpu_after = kueue_cpu_seconds()
    with finisher.lock:
        # A Workload's first event: its creation as this client saw it return, or the watch's first sight of it if
        # earlier (the runner's recorder takes the watch's, which undercounts a Workload first seen admitted:
        # kubernetes-sigs/kueue#11870).
        first = {k: min(created_at[k], finisher.first_seen.get(k, created_at[k])) for k in created}
        result = measures(planned["queues"], created, started, first,
                          dict(finisher.last_admitted), {k: list(v) for k, v in finisher.intervals.items()})
        admitted = len(finisher.admitted & set(created))
        finished = len(finisher.finished & set(created))
        evictions = sum(max(0, n - 1) for k, n in finisher.admissions.items() if k in created)
    paced = max(ws["count"] * len(ws["workloads"]) * ws.get("creationIntervalMs", 0) / 1000.0
                for q in planned["queues"] for _i, ws in q["sets"])
    return dict(result, created=len(created), expected=expected, create_failures=failures[:10],
                admitted=admitted, finished=finished, lost=expected - finished, evictions_seen=evictions,
                created_seconds=round(created_seconds, 1), timed_out=timed_out,
                paced_seconds=round(paced, 1),
                kueue_cpu_seconds=round(cpu_after - cpu_before, 1) if None not in (cpu_before, cpu_after) else None,
                watch_or_finish_errors=finisher.errors, finish_retries=finisher.retries)


def main():
    os.makedirs(scale.RESULTS, exist_ok=True)
    version = scale.kueue_version()
    generator, rangespec, directory = upstream_config(version)
    planned = plan(generator)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "kueue_version": version, "config": CONFIG_NAME,
              "config_dir": directory[directory.index("kueue@"):] if "kueue@" in directory else directory,
              "cluster_queues": len(planned["queues"]), "cohorts": len({q["cohort"] for q in planned["queues"]}),
              "workloads": workload_count(planned),
              "rangespec": rangespec}
    log("teardown of any earlier %s" % scale.NAME)
    scale.playbook("teardown.yml", os.path.join(scale.RESULTS, "baseline-teardown-before.log"), VARS)
    rc = 1
    try:
        log("site.yml (Kueue without fair sharing, as the test's minimalkueue)")
        report["site_seconds"], report["site_rc"] = scale.playbook("site.yml", os.path.join(scale.RESULTS, "baseline-site.log"), VARS)
        if report["site_rc"] != 0:
            raise RuntimeError("site.yml failed: %s" % os.path.join(scale.RESULTS, "baseline-site.log"))
        report["monitoring_stopped"] = scale.stop_monitoring()
        api = config.new_client_from_config(scale.KUBECONFIG)
        api.configuration.connection_pool_maxsize = 128
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 128
        report.update(run(client.CustomObjectsApi(api), client.CoreV1Api(api), planned))
        report["checks"] = judge(report, rangespec)
        rc = 0 if report["lost"] == 0 else 1
    except Exception as error:  # report what was measured, then tear down
        report["error"] = str(error)
        log("failed: %s" % error)
    finally:
        if not KEEP:
            log("teardown")
            scale.playbook("teardown.yml", os.path.join(scale.RESULTS, "baseline-teardown.log"), VARS)
    report.setdefault("checks", [])
    for key in ("created", "admitted", "finished", "lost", "evictions_seen"):
        report.setdefault(key, 0)
    report.setdefault("site_seconds", 0.0)
    scale.write_report(report, "baseline", markdown(report))
    return rc


if __name__ == "__main__":
    sys.exit(main())
