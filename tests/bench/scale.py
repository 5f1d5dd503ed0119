"""fairgpu's scale benchmark (not a test; issue 17 item 5): many simulated GPU nodes, tenants in one cohort and
thousands of workloads through the real Kueue, on this machine.

What: site.yml brings up an embedded cluster of its own (fairgpu-scale, local ports 20xxx) with SCALE_NODES kwok
nodes of 8 simulated H100s and SCALE_TENANTS tenants in fairgpu's default cohort, whose nominal quotas sum to the
GPUs. Then two variants go through Kueue (fair sharing on, as site.yml configures it):

  (a) SCALE_WORKLOADS bare kueue.x-k8s.io/v1beta2 Workloads, spread round-robin over the tenants' LocalQueues,
      no pods: the shape of Kueue's own scheduler performance test (test/performance/scheduler, v0.19.2: its
      generator creates Workloads with one request each and its runner marks an admitted Workload Finished once
      its running time is up). Here too: three classes in the test's proportions (350:100:50) and running times
      (200, 500, 1000 ms), asking 1, 4 and 8 GPUs; this script sets the Finished condition (reason ByTest, as the
      runner does) so that quota frees and admissions continue.
  (b) SCALE_PODS batch/v1 Jobs with the queue-name label, each of one pod that kwok runs and completes after 1 s
      (pod-complete delay annotations, the replay's job manifest): Kueue, the Job controller, kube-scheduler and
      kwok all take part. 0 skips it.

How it measures: from what Kueue wrote on each Workload, creationTimestamp to the QuotaReserved condition's
lastTransitionTime (fairness.workload_wait; both 1 s resolution); admissions per second over the span from the
first creation to the last reservation; Workloads lost (created but missing, never admitted or never Finished:
must be 0); wall times; peak memory (VmHWM of /proc/<pid>/status) of etcd and kube-apiserver (kwokctl's binary
runtime, found by their command lines under the cluster's directory) and of the local Kueue (its pid file). The
processes live from site.yml on, so the peaks include set-up. Prints a Markdown table and writes
results/bench-scale/scale.json (and the site.yml log, with per-task times, beside it). The cluster is removed at
the end, after a failure too.

Usage: make bench-scale [SCALE_NODES=1000] [SCALE_TENANTS=20] [SCALE_WORKLOADS=10000] [SCALE_PODS=1000]
       [SCALE_TIMEOUT=2400 seconds per variant] [SCALE_KEEP=1 leaves the cluster up]
"""

import concurrent.futures
import datetime
import heapq
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.fairness import percentile, workload_wait  # noqa: E402
from ansible_collections.fairgpu.tenancy.plugins.module_utils.replay.schedule import job_manifest  # noqa: E402

NODES = int(os.environ.get("SCALE_NODES", "1000"))
TENANTS = int(os.environ.get("SCALE_TENANTS", "20"))
WORKLOADS = int(os.environ.get("SCALE_WORKLOADS", "10000"))
PODS = int(os.environ.get("SCALE_PODS", "1000"))
TIMEOUT = int(os.environ.get("SCALE_TIMEOUT", "2400"))
KEEP = os.environ.get("SCALE_KEEP", "0") == "1"
# site.yml starts Prometheus and the simulated DCGM exporter (which lists every node and running pod on each 5 s
# scrape); neither is measured here, so by default they are stopped before the workloads (SCALE_MONITORING=1 keeps them).
MONITORING = os.environ.get("SCALE_MONITORING", "0") == "1"
THREADS = int(os.environ.get("SCALE_THREADS", "8"))
# 1: the bare Workloads are created onto held ClusterQueues (spec.stopPolicy Hold) and released together, so that
# Kueue drains a backlog of all of them at its own pace; 0: admitted while they are being created (then the
# client's creation rate bounds the admissions).
HOLD = os.environ.get("SCALE_HOLD", "1") == "1"
GPUS_PER_NODE = 8
NAME = "fairgpu-scale"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
BENCH_LABEL = "fairgpu.io/bench-scale"
RUN_ID = "bench-scale-jobs"
# Kueue's baseline classes (configs/baseline/generator.yaml, v0.19.2): 350 small, 100 medium, 50 large per queue,
# running 200, 500 and 1000 ms. Requests here are GPUs of one node (the test asks 1, 5 and 20 CPU units).
CLASSES = [("small", 350, 1, 0.2), ("medium", 100, 4, 0.5), ("large", 50, 8, 1.0)]
RESULTS = os.path.join(ROOT, "results", "bench-scale")
STATE = os.path.expanduser("~/.local/share/fairgpu")
KUBECONFIG = os.path.join(STATE, "kwok", "clusters", NAME, "kubeconfig.yaml")
BIN = os.path.dirname(sys.executable)
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
           ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks")


def kueue_version():
    with open(os.path.join(ROOT, "files", "lab", "toolchain", "versions.env")) as handle:
        for line in handle:
            if line.startswith("KUEUE_VERSION="):
                return line.split("=", 1)[1].strip()
    return "?"


def log(message):
    print("[%s] %s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def tenants():
    """TENANTS tenants whose nominal quotas sum to the GPUs; max_jobs room for the Jobs variant."""
    gpus = NODES * GPUS_PER_NODE
    per, extra = divmod(gpus, TENANTS)
    max_jobs = max(100, PODS // TENANTS + 50)
    return [{"name": "tenant-%02d" % i, "gpus": per + (1 if i < extra else 0), "max_jobs": max_jobs}
            for i in range(TENANTS)]


VARS = {
    "cluster_name": NAME,
    "run_local_ports": {"kueue_webhook": 20443, "kueue_metrics": 20444, "kueue_health": 20081, "prometheus": 20090,
                        "dcgm_exporter": 20400, "kube_state_metrics": 20480, "kube_state_metrics_telemetry": 20490},
    "lab_cluster_node_pools": [{"name": "gpu-node", "count": NODES, "gpu_product": "NVIDIA-H100-80GB-HBM3",
                                "gpu_count": GPUS_PER_NODE, "cpu": "96", "memory": "1Ti"}],
    "tenants_list": tenants(),
}


def playbook(name, logfile, variables=None):
    """Run playbooks/<name> with ``variables`` (default VARS) as extra vars; returns (seconds, exit status)."""
    cmd = [os.path.join(BIN, "ansible-playbook"), "playbooks/" + name, "-e", json.dumps(variables or VARS)]
    start = time.monotonic()
    with open(logfile, "w") as handle:
        proc = subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=handle, stderr=subprocess.STDOUT, check=False)
    return time.monotonic() - start, proc.returncode


def processes():
    """pid of etcd, kube-apiserver (command line under this cluster's directory) and Kueue (its pid file)."""
    found = {}
    marker = os.path.join("clusters", NAME)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if not argv or marker.encode() not in b" ".join(argv):
            continue
        base = os.path.basename(argv[0].decode(errors="replace"))
        for component in ("etcd", "kube-apiserver"):
            if base == component or base.startswith(component + "-v"):
                found[component] = int(entry)
    try:
        with open(os.path.join(STATE, "kueue", NAME, "kueue.pid")) as handle:
            found["kueue"] = int(handle.read().strip())
    except (OSError, ValueError):
        pass
    return found


def memory():
    """VmHWM (peak resident set) and VmRSS in MiB per component."""
    out = {}
    for component, pid in processes().items():
        fields = {}
        try:
            with open("/proc/%d/status" % pid) as handle:
                for line in handle:
                    key, _sep, value = line.partition(":")
                    if key in ("VmHWM", "VmRSS"):
                        fields[key] = round(int(value.split()[0]) / 1024.0, 1)
        except OSError:
            continue
        out[component] = fields
    return out


def stop_monitoring():
    """Stop the local Prometheus and simulated DCGM exporter site.yml started (by their pid files, as the monitoring
    role's stop.yml does); teardown.yml finds them stopped. Returns the pid files' names."""
    workdir = os.path.join(STATE, "monitoring", NAME)
    stopped = []
    for entry in sorted(os.listdir(workdir)) if os.path.isdir(workdir) else []:
        if entry.endswith(".pid"):
            subprocess.run(["start-stop-daemon", "--stop", "--pidfile", os.path.join(workdir, entry), "--remove-pidfile",
                            "--retry", "TERM/15/KILL/5", "--oknodo"], check=False, capture_output=True)
            stopped.append(entry[:-4])
    return stopped


def cond(obj, kind):
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind and c.get("status") == "True"), None)


def local_queues(custom):
    """tenant (ClusterQueue) -> (namespace, LocalQueue)."""
    queues = {}
    for lq in custom.list_cluster_custom_object(GROUP, VERSION, "localqueues")["items"]:
        queues.setdefault(lq["spec"]["clusterQueue"], (lq["metadata"]["namespace"], lq["metadata"]["name"]))
    return queues


def list_workloads(custom):
    items, token = [], None
    while True:
        kwargs = {"limit": 500}
        if token:
            kwargs["_continue"] = token
        page = retried(lambda: custom.list_cluster_custom_object(GROUP, VERSION, "workloads", **kwargs))
        items.extend(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return items


class Finisher:
    """Watches Workloads and plays the job controller for bare ones, as Kueue's perf runner does
    (test/performance/scheduler/runner/controller/controller.go, v0.19.2): an admitted Workload is marked Finished
    (reason ByTest) its running time after its latest admission; an evicted one (preempted) has its quota
    reservation removed (QuotaReserved False with reason Pending, status.admission cleared, Admitted False: Kueue's
    workload.UnsetQuotaReservationWithCondition, which the job integrations call and nothing calls for a Workload
    without a job), so that Kueue queues it again. On this client's clock, as the runner's recorder does, it keeps
    when each Workload was first seen, when it was last admitted, and its admitted intervals."""

    def __init__(self, custom, selector, finish):
        self.custom, self.selector, self.finish = custom, selector, finish
        self.lock = threading.Lock()
        self.due = []
        self.admitted, self.finished = set(), set()
        self.latest = {}
        self.stop = threading.Event()
        self.errors = 0
        self.retries = 0
        self.first_seen, self.admitted_since, self.last_admitted = {}, {}, {}
        self.admissions, self.intervals, self.unreserving = {}, {}, set()

    def _ended(self, key, now):
        """The admission seen since admitted_since[key] ended now (finished or evicted)."""
        since = self.admitted_since.pop(key, None)
        if since is not None:
            self.intervals.setdefault(key, []).append((since, now))

    def observe(self, wl):
        key = (wl["metadata"]["namespace"], wl["metadata"]["name"])
        now = time.time()
        with self.lock:
            self.first_seen.setdefault(key, now)
            if cond(wl, "Finished"):
                if key not in self.finished:
                    self.finished.add(key)
                    self._ended(key, now)
                self.admitted.add(key)
                return
            evicted = cond(wl, "Evicted") is not None and cond(wl, "QuotaReserved") is not None
            if cond(wl, "Admitted") and not evicted:
                self.admitted.add(key)
                self.latest[key] = wl
                self.unreserving.discard(key)  # admitted again (the watch may not have shown the state between)
                if key not in self.admitted_since:
                    self.admitted_since[key] = self.last_admitted[key] = now
                    self.admissions[key] = self.admissions.get(key, 0) + 1
                    if self.finish:
                        runtime = float((wl["metadata"].get("labels") or {}).get(BENCH_LABEL + "-runtime", "0"))
                        heapq.heappush(self.due, (time.monotonic() + runtime, key, self.admissions[key]))
                return
            self._ended(key, now)
            if not evicted:
                self.unreserving.discard(key)
            elif self.finish and key not in self.unreserving:
                self.unreserving.add(key)
                heapq.heappush(self.due, (time.monotonic(), key, 0))

    def watch_loop(self):
        """List, then watch for 30 s, again and again: each list sees every Workload afresh (a watch can lag)."""
        while not self.stop.is_set():
            try:
                page = self.custom.list_cluster_custom_object(GROUP, VERSION, "workloads", label_selector=self.selector)
                for wl in page["items"]:
                    self.observe(wl)
                stream = watch.Watch().stream(self.custom.list_cluster_custom_object, GROUP, VERSION, "workloads",
                                              label_selector=self.selector,
                                              resource_version=page["metadata"]["resourceVersion"], timeout_seconds=30)
                for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.observe(event["object"])
                    if self.stop.is_set():
                        break
            except Exception as error:  # a watch that expired (410) or dropped: list again
                self.errors += 1
                log("watch restarted: %s" % str(error)[:120])
                time.sleep(1)

    def _transition(self, wl, condition, now):
        condition.update(lastTransitionTime=now, observedGeneration=wl["metadata"].get("generation", 1))
        wl["status"]["conditions"] = [c for c in wl["status"].get("conditions") or []
                                      if c["type"] != condition["type"]] + [condition]

    def settle_one(self, key, admission):
        """admission > 0: set Finished on the Workload if that admission still holds; 0: remove the quota
        reservation of an evicted Workload. A conflict or a 5xx: read it again and retry."""
        try:
            self._settle(key, admission)
        finally:
            if not admission:
                # Done with this eviction, whatever came of it: the watch may never show the state after it (a
                # relist sees only the latest), and a later eviction must be ended again.
                with self.lock:
                    self.unreserving.discard(key)

    def _settle(self, key, admission):
        namespace, name = key
        with self.lock:
            wl = self.latest.pop(key, None) if admission else None
        for attempt in range(20):
            try:
                if wl is None:
                    wl = self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "workloads", name)
                now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                with self.lock:
                    current = self.admissions.get(key) == admission and key in self.admitted_since
                if cond(wl, "Finished"):
                    return
                if admission:
                    if not current or not cond(wl, "Admitted") or cond(wl, "Evicted"):
                        return  # evicted since: its next admission is timed afresh
                    self._transition(wl, {"type": "Finished", "status": "True", "reason": "ByTest",
                                          "message": "By the fairgpu scale benchmark"}, now)
                else:
                    if not (cond(wl, "Evicted") and cond(wl, "QuotaReserved")):
                        return
                    self._transition(wl, {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                          "message": "Evicted, the fairgpu scale benchmark ended it"}, now)
                    self._transition(wl, {"type": "Admitted", "status": "False", "reason": "NoReservation",
                                          "message": "The workload has no reservation"}, now)
                    wl["status"].pop("admission", None)
                self.custom.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, "workloads", name, wl)
                return
            except ApiException as error:
                wl = None
                if error.status == 409:
                    continue
                if error.status in RETRYABLE:
                    self.retries += 1
                    time.sleep(min(10, 1 + attempt))
                    continue
                self.errors += 1
                log("settling %s/%s: %s %s" % (namespace, name, error.status, error.reason))
                return
            except Exception as error:  # a dropped connection: read it again
                wl = None
                self.retries += 1
                log("settling %s/%s: %s" % (namespace, name, str(error)[:120]))
                time.sleep(min(10, 1 + attempt))
        self.errors += 1

    def finish_loop(self, pool):
        while not self.stop.is_set():
            now = time.monotonic()
            ready = []
            with self.lock:
                while self.due and self.due[0][0] <= now:
                    ready.append(heapq.heappop(self.due)[1:])
            for key, admission in ready:
                try:
                    pool.submit(self.settle_one, key, admission)
                except RuntimeError:  # the pool was shut down: the run is over
                    return
            time.sleep(0.05)


RETRYABLE = (429, 500, 502, 503, 504)


def retried(call, attempts=10):
    """call(), again after 429 and 5xx answers (an API server this loaded answers 504 now and then)."""
    for attempt in range(attempts):
        try:
            return call()
        except ApiException as error:
            if error.status not in RETRYABLE or attempt == attempts - 1:
                raise
            log("retrying after %s %s" % (error.status, error.reason))
            time.sleep(min(10, 1 + attempt))
    return None


def stop_policy(custom, cluster_queues, policy):
    """Set spec.stopPolicy (Hold: no new admissions, the admitted stay; None: admit) of the ClusterQueues."""
    for name in cluster_queues:
        body = {"spec": {"stopPolicy": policy}}
        retried(lambda n=name: custom.patch_cluster_custom_object(GROUP, VERSION, "clusterqueues", n, body))


def bare_workloads(queues):
    """SCALE_WORKLOADS Workload manifests, the classes interleaved in Kueue's proportions, round-robin over the
    tenants."""
    weights = [c[1] for c in CLASSES]
    order = []
    for index in range(sum(weights)):
        # Spread each class evenly through the sequence (small, small, ..., medium, ..., large).
        order.append(min(CLASSES, key=lambda c, i=index: (sum(1 for o in order if o is c) + 1) / c[1] - (i + 1) / sum(weights)))
    tenants_sorted = sorted(queues)
    out = []
    for number in range(WORKLOADS):
        klass = order[number % len(order)]
        tenant = tenants_sorted[number % len(tenants_sorted)]
        namespace, queue = queues[tenant]
        out.append({
            "apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Workload",
            "metadata": {"name": "scale-%05d-%s" % (number, klass[0]), "namespace": namespace,
                         "labels": {BENCH_LABEL: "workloads", BENCH_LABEL + "-class": klass[0],
                                    BENCH_LABEL + "-runtime": str(klass[3])}},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox:1.37", "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(klass[2])},
                    "limits": {"nvidia.com/gpu": str(klass[2])}}}]}}}]},
        })
    return out


def jobs(queues):
    tenants_sorted = sorted(queues)
    weights = [c[1] for c in CLASSES]
    sizes = [c[2] for c in CLASSES for _copy in range(c[1] // 50)]  # 7 small, 2 medium, 1 large in every 10
    out = []
    for number in range(PODS):
        tenant = tenants_sorted[number % len(tenants_sorted)]
        namespace, queue = queues[tenant]
        job = {"name": "scale-job-%05d" % number, "namespace": namespace, "queue": queue, "tenant": tenant,
               "gpus": sizes[number % len(sizes)], "seconds": 1, "at": 0, "trace_name": "bench-scale"}
        out.append(job_manifest(job, RUN_ID, "busybox:1.37", True))
    assert sum(weights) == 500
    return out


def create_all(create, manifests):
    """Create every manifest with THREADS client threads; returns (seconds, failures)."""
    start = time.monotonic()
    failures = []

    def one(manifest):
        for attempt in range(5):
            try:
                create(manifest)
                return None
            except ApiException as error:
                if error.status == 409:
                    return None
                if attempt == 4 or error.status not in (429, 500, 503, 504):
                    return "%s: %s %s" % (manifest["metadata"]["name"], error.status, (error.body or "")[:200])
                time.sleep(1 + attempt)
        return None

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        for result in pool.map(one, manifests):
            if result:
                failures.append(result)
    return time.monotonic() - start, failures


def ts(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def summarize(created_names, workloads, wall, submit_seconds, failures, released=None):
    by_key = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in workloads}
    waits, created, reserved, finished, lost = [], [], [], [], []
    for key in created_names:
        wl = by_key.get(key)
        if wl is None:
            lost.append("%s/%s: missing" % key)
            continue
        wait = workload_wait(wl)
        done = cond(wl, "Finished")
        created.append(ts(wl["metadata"]["creationTimestamp"]))
        if wait is None:
            lost.append("%s/%s: never admitted" % key)
            continue
        waits.append(wait)
        reserved.append(ts(cond(wl, "QuotaReserved")["lastTransitionTime"]))
        if done is None:
            lost.append("%s/%s: not finished" % key)
        else:
            finished.append(ts(done["lastTransitionTime"]))
    # Admissions per second: over first creation to last reservation, or after a hold from the release on.
    begin = released if released is not None else (min(created) if created else None)
    span = (max(reserved) - begin) if reserved and begin is not None else None
    after_release = [max(0.0, r - released) for r in reserved] if released is not None else []
    evictions = sum(sum(e.get("count", 0) for e in ((w.get("status") or {}).get("schedulingStats") or {}).get("evictions") or [])
                    for w in workloads)
    return {
        "workloads": len(created_names), "admitted": len(waits), "finished": len(finished), "lost": len(lost),
        "lost_examples": lost[:10], "create_failures": len(failures), "create_failure_examples": failures[:5],
        "submit_seconds": round(submit_seconds, 1), "wall_seconds": round(wall, 1),
        "admission_span_seconds": round(span, 1) if span is not None else None,
        "admissions_per_second": round(len(waits) / span, 2) if span else None,
        "wait_p50": percentile(waits, 0.5), "wait_p99": percentile(waits, 0.99), "wait_max": percentile(waits, 1.0),
        "wait_mean": round(sum(waits) / len(waits), 2) if waits else None, "evictions": evictions,
        "held_then_released": released is not None,
        "release_to_admission_p50": percentile(after_release, 0.5),
        "release_to_admission_p99": percentile(after_release, 0.99),
        "release_to_admission_max": percentile(after_release, 1.0),
    }


def run_variant(name, custom, create, manifests, keys, selector, finish, hold=()):
    log("%s: creating %d objects with %d threads" % (name, len(manifests), THREADS))
    finisher = Finisher(custom, selector, finish)
    pool = concurrent.futures.ThreadPoolExecutor(THREADS)
    threads = [threading.Thread(target=finisher.watch_loop, daemon=True),
               threading.Thread(target=finisher.finish_loop, args=(pool,), daemon=True)]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    if hold:
        stop_policy(custom, hold, "Hold")
    submit_seconds, failures = create_all(create, manifests)
    log("%s: created in %.1f s (%d failures)" % (name, submit_seconds, len(failures)))
    released = None
    if hold:
        time.sleep(1)
        released = time.time()
        stop_policy(custom, hold, "None")
        log("%s: released the %d ClusterQueues" % (name, len(hold)))
    wanted = len(keys) - len(failures)
    last, last_change = -1, time.monotonic()
    while time.monotonic() - start < TIMEOUT:
        with finisher.lock:
            done, admitted = len(finisher.finished), len(finisher.admitted)
        if done >= wanted:
            break
        if done != last:
            last, last_change = done, time.monotonic()
        if int(time.monotonic() - start) % 15 == 0:
            log("%s: %d admitted, %d finished of %d" % (name, admitted, done, wanted))
        time.sleep(1)
    wall = time.monotonic() - start
    finisher.stop.set()
    # After a time-out, the Finished updates still queued are dropped (they would only delay the report).
    pool.shutdown(wait=True, cancel_futures=True)
    log("%s: %d finished after %.1f s; reading the Workloads back" % (name, len(finisher.finished), wall))
    everything = list_workloads(custom)
    result = summarize(keys, [w for w in everything if selects(w, selector, keys)], wall, submit_seconds, failures,
                       released)
    result["watch_or_finish_errors"] = finisher.errors
    result["finish_retries"] = finisher.retries
    result["timed_out"] = wall >= TIMEOUT
    return result


def selects(wl, selector, keys):
    return (wl["metadata"]["namespace"], wl["metadata"]["name"]) in keys


def job_workload_keys(custom, batch, names):
    """(namespace, name) of the Workloads Kueue made for the Jobs (owner reference)."""
    keys = set()
    for wl in list_workloads(custom):
        for owner in wl["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Job" and (wl["metadata"]["namespace"], owner["name"]) in names:
                keys.add((wl["metadata"]["namespace"], wl["metadata"]["name"]))
    return keys


def run_jobs(custom, batch, queues):
    manifests = jobs(queues)
    names = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in manifests}
    log("jobs: creating %d Jobs with %d threads" % (len(manifests), THREADS))
    start = time.monotonic()
    submit_seconds, failures = create_all(
        lambda m: batch.create_namespaced_job(m["metadata"]["namespace"], m), manifests)
    log("jobs: created in %.1f s (%d failures)" % (submit_seconds, len(failures)))
    succeeded = 0
    while time.monotonic() - start < TIMEOUT:
        succeeded = 0
        token = None
        while True:
            kwargs = {"label_selector": "fairgpu.io/replay=%s" % RUN_ID, "limit": 500}
            if token:
                kwargs["_continue"] = token
            page = retried(lambda: batch.list_job_for_all_namespaces(**kwargs))
            succeeded += sum(1 for j in page.items if (j.status.succeeded or 0) >= 1)
            token = page.metadata._continue
            if not token:
                break
        if succeeded >= len(manifests) - len(failures):
            break
        log("jobs: %d of %d Jobs succeeded" % (succeeded, len(manifests)))
        time.sleep(10)
    wall = time.monotonic() - start
    # Kueue marks a Job's Workload Finished shortly after the Job completes.
    time.sleep(5)
    keys = job_workload_keys(custom, batch, names)
    everything = list_workloads(custom)
    result = summarize(keys, [w for w in everything if (w["metadata"]["namespace"], w["metadata"]["name"]) in keys],
                       wall, submit_seconds, failures)
    result["jobs"] = len(manifests)
    result["jobs_succeeded"] = succeeded
    result["jobs_without_workload"] = len(manifests) - len(failures) - len(keys)
    result["jobs_not_succeeded"] = len(manifests) - succeeded
    # Lost: a Job without a Workload, or a Workload never admitted or never Finished (summarize); a Job that ran
    # but did not succeed is counted apart.
    result["lost"] += max(0, result["jobs_without_workload"])
    result["timed_out"] = wall >= TIMEOUT
    return result


def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.1f%s" % (value, unit)
    return "%s%s" % (value, unit)


def table(report):
    lines = ["fairgpu bench-scale, %s, %s (%d cores; other agents' clusters may share the machine)\n"
             % (report["date"], os.uname().nodename, os.cpu_count()),
             "%d kwok nodes x %d GPUs (%d GPUs), %d tenants in one cohort (fair sharing), Kueue %s\n"
             % (NODES, GPUS_PER_NODE, NODES * GPUS_PER_NODE, TENANTS, report.get("kueue_version", "?")),
             "| variant | objects | created in s | wall s | admitted | finished | lost | admissions/s | p50 s | p99 s | max s | evictions |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, label in (("workloads", "(a) bare Workloads, no pods"), ("jobs", "(b) Jobs, one kwok pod each")):
        r = report.get(key)
        if not r:
            continue
        lines.append("| %s | %d | %s | %s | %d | %d | %d | %s | %s | %s | %s | %d |" % (
            label, r["workloads"], fmt(r["submit_seconds"]), fmt(r["wall_seconds"]), r["admitted"], r["finished"],
            r["lost"], fmt(r["admissions_per_second"]), fmt(r["wait_p50"]), fmt(r["wait_p99"]), fmt(r["wait_max"]),
            r["evictions"]))
        if r.get("held_then_released"):
            lines.append("| %s: from the release of the held queues | | | | | | | | %s | %s | %s | |" % (
                label.split(" ", maxsplit=1)[0], fmt(r["release_to_admission_p50"]), fmt(r["release_to_admission_p99"]),
                fmt(r["release_to_admission_max"])))
    if report.get("jobs_skipped"):
        lines.append("| (b) Jobs: skipped, %s | | | | | | | | | | | |" % report["jobs_skipped"])
    lines.append("\nadmissions/s: admitted / (last QuotaReserved - first creation, or - the release after a hold); "
                 "p50/p99/max: creationTimestamp to QuotaReserved (1 s resolution)")
    lines.append("\n| process | peak RSS after site.yml MiB | peak RSS at the end MiB (VmHWM) |")
    lines.append("|---|---|---|")
    for component in ("etcd", "kube-apiserver", "kueue"):
        before = report["memory_after_site"].get(component, {}).get("VmHWM")
        after = report["memory_end"].get(component, {}).get("VmHWM")
        lines.append("| %s | %s | %s |" % (component, fmt(before), fmt(after)))
    lines.append("\nsite.yml %.0f s (rc %d); benchmark total %.0f s"
                 % (report["site_seconds"], report["site_rc"], report["total_seconds"]))
    return "\n".join(lines)


def main():
    os.makedirs(RESULTS, exist_ok=True)
    total = time.monotonic()
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "nodes": NODES, "gpus": NODES * GPUS_PER_NODE, "tenants": TENANTS, "threads": THREADS,
              "cores": os.cpu_count(), "classes": CLASSES, "kueue_version": kueue_version()}
    log("teardown of any earlier %s" % NAME)
    playbook("teardown.yml", os.path.join(RESULTS, "teardown-before.log"))
    rc = 1
    try:
        log("site.yml: %d nodes, %d tenants" % (NODES, TENANTS))
        report["site_seconds"], report["site_rc"] = playbook("site.yml", os.path.join(RESULTS, "site.log"))
        log("site.yml took %.0f s (rc %d)" % (report["site_seconds"], report["site_rc"]))
        if report["site_rc"] != 0:
            raise RuntimeError("site.yml failed: %s" % os.path.join(RESULTS, "site.log"))
        report["memory_after_site"] = memory()
        report["monitoring_stopped"] = [] if MONITORING else stop_monitoring()
        api = config.new_client_from_config(KUBECONFIG)
        api.configuration.connection_pool_maxsize = THREADS * 2 + 4
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = THREADS * 2 + 4
        custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
        try:
            deploy = client.CoreV1Api(api).list_node(label_selector="fairgpu.io/node-pool", limit=1)
            report["nodes_seen"] = len(deploy.items) and int(NODES)
        except ApiException:
            pass
        queues = local_queues(custom)
        report["local_queues"] = len(queues)
        if WORKLOADS:
            manifests = bare_workloads(queues)
            keys = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in manifests}
            report["workloads"] = run_variant(
                "workloads", custom,
                lambda m: custom.create_namespaced_custom_object(GROUP, VERSION, m["metadata"]["namespace"], "workloads", m),
                manifests, keys, "%s=workloads" % BENCH_LABEL, True, hold=sorted(queues) if HOLD else ())
            report["memory_after_workloads"] = memory()
        if PODS and report.get("workloads", {}).get("timed_out"):
            # The bare Workloads still admitted hold the quota and nothing finishes them any more: the Jobs would
            # measure that, not Kueue (the full run of 2026-12-02 did, and none succeeded).
            report["jobs_skipped"] = "variant (a) timed out"
            log("jobs: skipped, variant (a) timed out")
        elif PODS:
            report["jobs"] = run_jobs(custom, batch, queues)
        report["memory_end"] = memory()
        lost = sum(report[v]["lost"] for v in ("workloads", "jobs") if v in report)
        rc = 0 if lost == 0 else 1
    except Exception as error:  # report what was measured, then tear down
        report["error"] = str(error)
        log("failed: %s" % error)
        report.setdefault("memory_end", memory())
        report.setdefault("memory_after_site", {})
        report.setdefault("site_seconds", 0.0)
        report.setdefault("site_rc", -1)
    finally:
        if not KEEP:
            log("teardown")
            report["teardown_seconds"], report["teardown_rc"] = playbook("teardown.yml", os.path.join(RESULTS, "teardown.log"))
    report["total_seconds"] = round(time.monotonic() - total, 1)
    write_report(report, "scale", table(report))
    return rc


def write_report(report, name, text):
    """results/bench-scale/<name>.json and <name>.md; the Markdown printed, and the error if there was one."""
    with open(os.path.join(RESULTS, name + ".json"), "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True, default=str)
    with open(os.path.join(RESULTS, name + ".md"), "w") as handle:
        handle.write(text + "\n")
    print(text)
    if "error" in report:
        print("\nerror: %s" % report["error"])


if __name__ == "__main__":
    sys.exit(main())
