"""Monitoring on the embedded cluster: the real Prometheus scrapes the real Kueue controller (HTTPS, a
ServiceAccount's token that RBAC allows /metrics) and the simulated DCGM exporter; during a validation run
(flood) every dashboard panel returns series and the over-guarantee alert fires for the flooding tenant only."""

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import CLUSTER, ROOT, VARS, condition, load_job, playbook, wait_until, workloads
from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import dashboard, page
from ansible_collections.fairgpu.tenancy.plugins.module_utils.kueue import status as kueue_status
from ansible_collections.fairgpu.tenancy.plugins.module_utils.validation import scenarios as validation

with open(VARS) as _handle:
    IT_VARS = yaml.safe_load(_handle)
with open(os.path.join(ROOT, "inventories", "local", "group_vars", "gpu_clusters.yml")) as _handle:
    _LOCAL = yaml.safe_load(_handle)
OVER_GUARANTEE_FOR = _LOCAL["monitoring_alert_for"]["FairgpuTenantOverGuarantee"]
GUARANTEES = {t["name"]: t["gpus"] for t in _LOCAL["tenants_list_kueue"]}
PROMETHEUS = "http://127.0.0.1:%d" % IT_VARS["run_local_ports"]["prometheus"]
EXPORTER = "http://127.0.0.1:%d/metrics" % IT_VARS["run_local_ports"]["dcgm_exporter"]
KUBE_STATE_METRICS = "http://127.0.0.1:%d/metrics" % IT_VARS["run_local_ports"]["kube_state_metrics"]
KUEUE_METRICS = "https://127.0.0.1:%d/metrics" % IT_VARS["run_local_ports"]["kueue_metrics"]
# The dashboard page: Prometheus's port + 1 unless the inventory gives one (plan/resolve.py, LOCAL_PORTS_AFTER).
DASHBOARD_PORT = IT_VARS["run_local_ports"].get("dashboard", IT_VARS["run_local_ports"]["prometheus"] + 1)
DASHBOARD = "http://127.0.0.1:%d/" % DASHBOARD_PORT
BROWSER = "/usr/bin/chromium"
WORKDIR = os.path.expanduser("~/.local/share/fairgpu/monitoring/%s" % CLUSTER)
KUEUE_CA = os.path.expanduser("~/.local/share/fairgpu/kueue/ca.crt")
RESULTS = os.path.join(ROOT, "results", "integration")
FIXTURE = os.path.join(ROOT, "tests", "unit", "fixtures", "dcgm", "a100-40gb-mig-mixed-metrics.txt")


def prometheus(path, **params):
    """``data`` of a Prometheus HTTP API answer to a GET."""
    url = PROMETHEUS + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as answer:
        document = json.load(answer)
    assert document["status"] == "success", document
    return document["data"]


def kueue_metrics(token):
    """HTTP status of a GET of Kueue's metrics endpoint with ``token`` (None: no Authorization header)."""
    request = urllib.request.Request(KUEUE_METRICS, headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=KUEUE_CA), timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_prometheus_scrapes_its_targets_and_loads_the_rules(cluster):
    targets = prometheus("/api/v1/targets", state="active")["activeTargets"]
    health = {t["labels"]["job"]: (t["health"], t["scrapeUrl"]) for t in targets}
    assert health == {"kueue": ("up", KUEUE_METRICS), "nvidia-dcgm-exporter": ("up", EXPORTER),
                      "kube-state-metrics": ("up", KUBE_STATE_METRICS)}, targets
    rules = {r["name"]: r["duration"] for g in prometheus("/api/v1/rules", type="alert")["groups"] for r in g["rules"]}
    seconds = int(OVER_GUARANTEE_FOR.rstrip("s"))
    assert rules == {"FairgpuTenantOverGuarantee": seconds, "FairgpuTenantStarved": 300,
                     "FairgpuTenantGpusOutsideKueue": 120, "FairgpuPodGpuMemoryHigh": 600, "FairgpuKueueDown": 10,
                     "FairgpuGpuPodOutsideTenants": 5,  # inventories/local: one scrape interval; Kueue down: test_45
                     "FairgpuGuaranteesOverCapacity": 15}
    # The real Kueue's quota series, by tenant (ClusterQueue), as Prometheus stored them.
    quota = prometheus("/api/v1/query", query='kueue_cluster_queue_nominal_quota{resource="nvidia.com/gpu"}')["result"]
    assert {(s["metric"]["cluster_queue"], s["value"][1]) for s in quota} == {("team-a", "8"), ("team-b", "8")}


def test_capacity_is_the_ready_nodes_allocatable_gpus_as_kube_state_metrics_reads_them(cluster, core):
    """Both sides of FairgpuGuaranteesOverCapacity from the real components: kube-state-metrics' reading of the
    simulated nodes' allocatable (the lab's device plugin stand-in publishes it) and Kueue's quotas; the guarantees
    fit, so the alert is quiet."""
    nodes = core.list_node(label_selector="fairgpu.io/node-pool").items
    offered = sum(int(n.status.allocatable.get("nvidia.com/gpu", 0)) for n in nodes
                  if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []))
    assert offered == 16, [(n.metadata.name, n.status.allocatable) for n in nodes]

    def sides():
        return dict((r["metric"]["__name__"], r["value"][1]) for r in prometheus(
            "/api/v1/query", query='{__name__=~"fairgpu:gpu_(nominal_quota|allocatable_ready):sum", '
                                   'resource="nvidia_com_gpu"}')["result"])
    wanted = {"fairgpu:gpu_nominal_quota:sum": "16", "fairgpu:gpu_allocatable_ready:sum": str(offered)}
    wait_until(lambda: sides() == wanted, 30, 2, what="both sides of the capacity alert (%s)" % wanted)
    firing = prometheus("/api/v1/query", query='ALERTS{alertname="FairgpuGuaranteesOverCapacity"}')["result"]
    assert firing == [], firing


def test_kueue_metrics_need_a_token_that_rbac_allows(cluster, core):
    assert kueue_metrics(None)[0] == 401
    core.create_namespaced_service_account("fairgpu-monitoring", {"metadata": {"name": "it-no-metrics"}})
    try:
        token = core.create_namespaced_service_account_token(
            "it-no-metrics", "fairgpu-monitoring", {"spec": {"expirationSeconds": 600}}).status.token
        assert kueue_metrics(token)[0] == 403
    finally:
        core.delete_namespaced_service_account("it-no-metrics", "fairgpu-monitoring")
    with open(os.path.join(WORKDIR, "token")) as handle:
        status, body = kueue_metrics(handle.read())
    assert status == 200 and "kueue_cluster_queue_nominal_quota{" in body


def test_simulated_exporter_speaks_like_dcgm_exporter(cluster):
    with urllib.request.urlopen(EXPORTER, timeout=10) as answer:
        ours = {f.name: f for f in text_string_to_metric_families(answer.read().decode())}
    with open(FIXTURE) as handle:
        real = {f.name: f for f in text_string_to_metric_families("".join(handle.readlines()[2:]))}
    assert set(ours) == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                         "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    whole_gpu = set(real["DCGM_FI_DEV_FB_USED"].samples[0].labels) - {"GPU_I_PROFILE", "GPU_I_ID"}
    for name, family in ours.items():
        assert {s.labels["Hostname"] for s in family.samples} == {"gpu-node-0", "gpu-node-1"}
        assert len(family.samples) == 16 and all(set(s.labels) == whole_gpu for s in family.samples)
        if name in real:
            assert (family.type, family.documentation) == (real[name].type, real[name].documentation)
    # Every device adds up to an H100 80GB HBM3's 81559 MiB; a device no pod holds uses none of it. (Pods of
    # earlier tests may still hold some GPUs: they hold at least a CUDA context's 512 MiB.)
    used = {s.labels["UUID"]: (s.labels["pod"], s.value) for s in ours["DCGM_FI_DEV_FB_USED"].samples}
    for sample in ours["DCGM_FI_DEV_FB_FREE"].samples:
        pod, value = used[sample.labels["UUID"]]
        assert sample.value + value == 81559 and (value == 0) == (pod == "")


def test_gpus_outside_kueue_name_the_tenant_that_holds_them(cluster, core, batch, kueue):
    """Someone allowed to create pods (not a tenant) adds a 2-GPU pod to team-a that claims team-a's admitted Job as
    its owner without being its pod: Kueue accounts those GPUs to nobody. The validation's accounting check and
    Prometheus's FairgpuTenantGpusOutsideKueue both name team-a, and the over-guarantee alert blames nobody."""
    owner = batch.create_namespaced_job("team-a", load_job("it-owner", "team-a", queue="team-a-queue", gpus=0,
                                                           seconds=600, labels={"it-outside": "1"}))
    pod = {"metadata": {"name": "it-outside", "labels": {"it-outside": "1"},
                        "annotations": {"fairgpu.io/simulated-gpu-memory-fraction": "0.5",
                                        "pod-complete.stage.kwok.x-k8s.io/delay": "600s",
                                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "600s"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "it-owner",
                                             "uid": owner.metadata.uid, "controller": True}]},
           "spec": {"restartPolicy": "Never", "containers": [{
               "name": "c", "image": "x",
               "resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}}
    try:
        wait_until(lambda: (condition(next((w for w in workloads(kueue, "team-a")
                                            if w["metadata"]["ownerReferences"][0]["name"] == "it-owner"), {}),
                                      "Admitted") or {}).get("status") == "True", 60, what="it-owner admitted")
        core.create_namespaced_pod("team-a", pod)
        wait_until(lambda: core.read_namespaced_pod("it-outside", "team-a").status.phase == "Running", 60,
                   what="the pod past Kueue to run")

        def sample():
            namespaces = ["team-a", "team-b"]
            queues = kueue.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
            local_queues = [q for ns in namespaces for q in kueue.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", ns, "localqueues")["items"]]
            pods = [cluster.sanitize_for_serialization(p) for ns in namespaces
                    for p in core.list_namespaced_pod(ns).items]
            info = kueue_status.admission_info(queues, local_queues, [], queue_names={"team-a", "team-b"}, pods=pods)
            return kueue_status.sample(info, time.monotonic(), time.time())

        samples = [sample()]
        time.sleep(6)
        samples.append(sample())
        assert samples[-1]["queues"]["team-a"]["running"] == 2 and samples[-1]["queues"]["team-a"]["reserved"] == 0
        check = validation.accounting_check(samples, 5, "live")
        assert not check["passed"] and check["observed"].startswith("team-a: pods hold 2, Kueue reserved 0"), check
        assert "team-b" not in check["observed"]

        recorded = wait_until(lambda: prometheus("/api/v1/query", query="fairgpu:tenant_gpu_devices_outside_kueue")["result"],
                              90, interval=2, what="the recording rule to see the pod past Kueue")
        assert [(r["metric"]["tenant"], r["value"][1]) for r in recorded] == [("team-a", "2")]
        alerts = wait_until(lambda: prometheus("/api/v1/query",
                                               query='ALERTS{alertname="FairgpuTenantGpusOutsideKueue"}')["result"],
                            60, interval=2, what="FairgpuTenantGpusOutsideKueue to go pending")
        assert {(a["metric"]["tenant"], a["metric"]["alertstate"]) for a in alerts} <= {("team-a", "pending"),
                                                                                        ("team-a", "firing")}
        assert prometheus("/api/v1/query", query='ALERTS{alertname="FairgpuTenantOverGuarantee"}')["result"] == []
    finally:
        core.delete_collection_namespaced_pod("team-a", label_selector="it-outside")
        batch.delete_collection_namespaced_job("team-a", label_selector="it-outside", propagation_policy="Background")
        wait_until(lambda: not core.list_namespaced_pod("team-a", label_selector="it-outside").items, 120,
                   what="the pod past Kueue to go")


def test_bad_alert_for_is_refused_before_anything_changes(cluster):
    run = playbook("site.yml", "-e", json.dumps({"monitoring_alert_for": {"FairgpuTenantOverQuota": "1m"}}))
    assert run.rc != 0
    assert "monitoring_alert_for.FairgpuTenantOverQuota: no such alert in the rule file" in run.messages()
    assert run.stats.get("changed", 0) == 0


def test_validation_fires_the_alert_for_the_flooder_only_and_every_panel_has_data(cluster):
    """validate.yml (flood) runs; meanwhile every panel's query is asked of Prometheus every few seconds, as
    Grafana would, until each has returned series."""
    # The scenario starts on an idle cluster, as validate.yml's own runs do: earlier tests' pods have gone.
    wait_until(lambda: not prometheus("/api/v1/query", query='sum(kueue_cluster_queue_resource_reservation'
                                                             '{resource="nvidia.com/gpu"}) > 0')["result"]
               and not prometheus("/api/v1/query", query='DCGM_FI_DEV_FB_USED{exported_pod!=""}')["result"],
               300, interval=5, what="no GPU held on the cluster")
    queries = [(title, ref, dashboard.direct_query(expr))
               for title, ref, expr in dashboard.queries()]
    seen = set()
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    started = time.time()
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(ROOT, "playbooks", "validate.yml"),
         "-e", "@" + VARS, "-e", json.dumps({"validate_scenarios": ["flood"]})],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        while proc.poll() is None and time.time() - started < 900:
            for title, ref, expr in queries:
                if (title, ref) not in seen and prometheus("/api/v1/query", query=expr)["result"]:
                    seen.add((title, ref))
            time.sleep(3)
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:]
    missing = [(title, ref, expr) for title, ref, expr in queries if (title, ref) not in seen]
    assert missing == [], "panels that never returned series during the run: %s" % missing

    with open(os.path.join(RESULTS, "report.json")) as handle:
        scenarios = {s["name"]: s for s in json.load(handle)["scenarios"]}
    alerts = scenarios["flood_alerts"]
    assert [c["check"] for c in alerts["checks"] if not c["passed"]] == []
    assert alerts["metrics"]["over_guarantee_for"].startswith(OVER_GUARANTEE_FOR)
    assert os.path.getsize(os.path.join(RESULTS, "flood-prometheus.png")) > 10000
    # The dashboard page over the flood's window, in headless Chromium, beside the plot in the report.
    assert alerts.get("notes") in (None, []), alerts["notes"]
    assert os.path.getsize(os.path.join(RESULTS, "flood-dashboard.png")) > 50000
    with open(os.path.join(RESULTS, "report.md")) as handle:
        assert "(flood-dashboard.png)" in handle.read()

    # The same, straight from Prometheus's record of its evaluations.
    def firing(tenant):
        return prometheus("/api/v1/query_range", query='ALERTS{alertstate="firing", tenant="%s"}' % tenant,
                          start=started, end=time.time(), step="5s")["result"]

    assert {s["metric"]["alertname"] for s in firing("team-a")} == {"FairgpuTenantOverGuarantee"}
    assert firing("team-b") == []
    pending = prometheus("/api/v1/query_range", query='ALERTS{alertstate="pending", tenant="team-a"}',
                         start=started, end=time.time(), step="5s")["result"]
    first_pending = min(float(t) for s in pending for t, _v in s["values"])
    first_firing = min(float(t) for s in firing("team-a") for t, _v in s["values"])
    assert first_firing - first_pending >= int(OVER_GUARANTEE_FOR.rstrip("s")) - 5


def browser():
    """Debian's Chromium; make test (FAIRGPU_MAKE_TEST) must have it (.ci/run installs it), elsewhere its absence skips."""
    if os.access(BROWSER, os.X_OK):
        return BROWSER
    if os.environ.get("FAIRGPU_MAKE_TEST") is not None:
        pytest.fail("make test needs Debian's chromium at %s (apt-get install chromium; .ci/run installs it)" % BROWSER)
    pytest.skip("no chromium at %s (apt-get install chromium)" % BROWSER)


def shown_number(text, unit):
    """A legend cell of a Perses time series chart as a number: "18", "0.209 ops/sec", "35%", "1.5K"."""
    number = text.strip().partition(" ")[0]
    scale = 1.0
    if number.endswith("%"):
        number, scale = number[:-1], 0.01 if unit == "ratio" else 1.0
    elif number[-1:] in ("K", "M"):
        number, scale = number[:-1], {"K": 1e3, "M": 1e6}[number[-1]]
    return float(number) * scale


def series_name(legend, labels):
    """The legend's name of a series: its {{label}}s filled in (a missing label empty), spaces as the page shows them."""
    return " ".join(re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), legend).split())


def the_target(panel, query, tenant):
    """The panel's target whose expression, with the page's variables, is ``query`` (Perses writes a multi-value
    variable inside a regular-expression matcher as a group: ``(team-a)``). The cluster variable is left at All: the
    page writes its value (the custom all value ``.*``, or the clusters listed), which must select this cluster."""
    for target in panel["targets"]:
        pattern = (re.escape(target["expr"]).replace(re.escape("$tenant"), r"\(?%s\)?" % re.escape(tenant))
                   .replace(re.escape("$cluster"), r'(?P<cluster>[^"]*)', 1)
                   .replace(re.escape("$cluster"), r"(?P=cluster)")
                   .replace(re.escape("$__rate_interval"), r"\d+(?:ms|s|m|h)"))
        found = re.fullmatch(pattern, query)
        if found:
            assert "cluster" not in found.groupdict() or re.fullmatch(found.group("cluster"), CLUSTER), query
            return target
    return None


def cors_allowed(origin):
    request = urllib.request.Request(PROMETHEUS + "/api/v1/query?query=up", headers={"Origin": origin})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.headers.get("Access-Control-Allow-Origin")


def test_the_dashboard_page_shows_what_prometheus_answers_in_a_real_browser(cluster):
    """The page (Perses's dashboard view of the Perses file) in headless Chromium over the last 20 minutes, which
    hold the flood of the test before, once per tenant (its tenant variable): every panel has series where
    Prometheus answers its queries with series, none shows an error, each tenant panel's legend gives the last and
    the largest value of each series as Prometheus gives them for the very query the page sent, the guarantee is
    the inventory's, and the page talks to 127.0.0.1 only and gets every file it asks for."""
    from playwright.sync_api import sync_playwright

    executable = browser()
    assert cors_allowed("http://127.0.0.1:%d" % DASHBOARD_PORT) == "http://127.0.0.1:%d" % DASHBOARD_PORT
    assert cors_allowed("http://127.0.0.1:1") is None
    end = time.time()
    panels = dashboard.panels()
    tenant_panels = [p for p in panels if any("$tenant" in t["expr"] for t in p["targets"])]
    checked = []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable,
                                              args=[f for f in page.CHROMIUM_FLAGS if f != "--headless"])
        try:
            for tenant in ("team-a", "team-b"):
                view = chromium.new_page(viewport={"width": page.WINDOW[0], "height": page.WINDOW[1]})
                sent, refused = [], []
                view.on("request", lambda r: sent.append((r.url, r.method, r.post_data)))
                view.on("response", lambda r: refused.append((r.status, r.url)) if r.status >= 400 else None)
                view.goto(page.window_url(DASHBOARD, end - 1200, end) + "&var-tenant=" + tenant)
                view.wait_for_load_state("networkidle", timeout=60000)
                # The panels' queries wait for the variables (the tenant's values follow the cluster's: two label
                # value requests in a row), and the network can be idle between those and the queries: wait for a
                # query of every panel target, then for the network once more.
                targets = sum(len(p["targets"]) for p in panels)
                deadline = time.time() + 60
                while time.time() < deadline and len(
                        [u for u, _m, d in sent if u.endswith("/api/v1/query_range") and d]) < targets:
                    view.wait_for_timeout(500)
                view.wait_for_load_state("networkidle", timeout=60000)
                assert {urllib.parse.urlsplit(u).hostname for u, _m, _d in sent} == {"127.0.0.1"}, sent
                # Every file the page asks for is there (its fonts once went to a path that was not: a 404 each).
                assert refused == [], refused
                asked = [urllib.parse.parse_qs(d) for u, m, d in sent if u.endswith("/api/v1/query_range") and d]
                shown = view.locator('[data-testid="panel"]')
                assert shown.count() == len(panels)
                for index, panel in enumerate(panels):
                    box = shown.nth(index)
                    assert box.locator("header").inner_text().strip() == panel["title"]
                    text = box.inner_text()
                    assert "Failed" not in text and "rror" not in text, (panel["title"], text)
                    rows = {}
                    cells = box.locator("td[data-testid]")
                    for i in range(cells.count()):
                        kind = cells.nth(i).get_attribute("data-testid").rsplit("_", 1)[-1]
                        rows.setdefault(kind, []).append(cells.nth(i).inner_text())
                    legend = dict(zip(rows.get("label", []), zip(rows.get("last-number", []), rows.get("max", []))))
                    answers = {}
                    for form in asked:
                        target = the_target(panel, form["query"][0], tenant)
                        if target is None:
                            continue
                        data = json.load(urllib.request.urlopen(urllib.request.Request(
                            PROMETHEUS + "/api/v1/query_range",
                            data=urllib.parse.urlencode({k: v[0] for k, v in form.items()}).encode()), timeout=10))
                        for series in data["data"]["result"]:
                            values = [float(v) for _t, v in series["values"]]
                            answers[series_name(target["legend"], series["metric"])] = (values[-1], max(values))
                    assert answers == {} or legend, "%s: no series shown, Prometheus has %s" % (panel["title"], answers)
                    assert set(legend) <= set(answers), (panel["title"], sorted(legend), sorted(answers),
                                                         [form["query"][0] for form in asked])
                    # A panel of one or two series draws a legend row for each (in the page, not always in sight: the
                    # legend scrolls).
                    if len(answers) <= 2:
                        assert set(legend) == set(answers), (panel["title"], sorted(legend), sorted(answers))
                    if panel in tenant_panels:
                        # Every legend names the series' cluster first (the local Prometheus labels every series
                        # with it), then the tenant.
                        named = "%s %s" % (CLUSTER, tenant)
                        assert all(name.startswith(named) for name in legend), (panel["title"], legend)
                        for name, (last, largest) in legend.items():
                            for cell, value in ((last, answers[name][0]), (largest, answers[name][1])):
                                number = shown_number(cell, panel["unit"])
                                assert abs(number - value) <= 0.01 * abs(value) + 1e-9, (panel["title"], name, cell, value)
                                checked.append((tenant, panel["title"], name))
                    if panel["id"] == 1:
                        guaranteed = legend["%s %s guaranteed" % (CLUSTER, tenant)][0]
                        assert shown_number(guaranteed, "count") == GUARANTEES[tenant]
                view.close()
        finally:
            chromium.close()
    # Both tenants held GPUs and queued work in the flood: their numbers were compared on those panels at least.
    wanted = {"GPUs held vs guaranteed per tenant", "Pending workloads per tenant"}
    for tenant in ("team-a", "team-b"):
        assert wanted <= {title for t, title, _n in checked if t == tenant}, checked


def test_prometheus_web_ui_shows_its_alerting_rules_and_graphs_in_a_real_browser(cluster):
    """Prometheus's own web UI (monitoring_prometheus_web_ui: the prometheus-web build, its UI made from the pinned
    module's web/ui) in headless Chromium: its title names the cluster (--web.page-title); the alerts page lists each
    alerting rule of fairgpu's rule file that Prometheus loaded, with "firing (N)" and "pending (N)" badges as the
    answer the page got has them; the query page graphs Kueue's GPU reservation per ClusterQueue over the last 20
    minutes (the flood of the tests before) with a legend row for each series of the answer it got; both talk to
    127.0.0.1 only and get every file they ask for. The UI holds a live notifications stream open
    (/api/v1/notifications/live), so the page never goes network-idle: the test waits for the answers instead."""
    from playwright.sync_api import sync_playwright

    executable = browser()
    with open(os.path.join(ROOT, "files", "monitoring", "fairgpu-alerts.rules.yml")) as handle:
        alert_names = {r["alert"] for g in yaml.safe_load(handle)["groups"] for r in g["rules"] if "alert" in r}
    expr = 'sum by (cluster_queue) (kueue_cluster_queue_resource_reservation{resource="nvidia.com/gpu"})'

    def api(path):
        return lambda response: urllib.parse.urlsplit(response.url).path == path

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable,
                                              args=[f for f in page.CHROMIUM_FLAGS if f != "--headless"])
        try:
            view = chromium.new_page(viewport={"width": 1600, "height": 1200})
            sent, refused = [], []
            view.on("request", lambda r: sent.append(r.url))
            view.on("response", lambda r: refused.append((r.status, r.url)) if r.status >= 400 else None)

            with view.expect_response(api("/api/v1/rules")) as answer:
                view.goto(PROMETHEUS + "/alerts")
            rules = [r for g in answer.value.json()["data"]["groups"] for r in g["rules"]]
            assert {r["name"] for r in rules} == alert_names
            assert view.title() == "Prometheus of %s (fairgpu)" % CLUSTER
            items = view.locator(".mantine-Accordion-item")
            items.nth(len(rules) - 1).wait_for(timeout=30000)
            shown = {}
            for i in range(items.count()):
                name, _sep, badges = items.nth(i).inner_text().strip().partition("\n")
                shown[name.strip()] = {state.lower(): int(count) for state, count
                                       in re.findall(r"(firing|pending) \((\d+)\)", badges, flags=re.I)}
            assert shown == {r["name"]: {state: n for state in ("firing", "pending")
                                         if (n := sum(1 for a in r["alerts"] if a["state"] == state))}
                             for r in rules}, shown

            with view.expect_response(api("/api/v1/query_range")) as answer:
                view.goto(PROMETHEUS + "/query?" + urllib.parse.urlencode(
                    {"g0.expr": expr, "g0.tab": "graph", "g0.range_input": "20m"}))
            result = answer.value.json()["data"]["result"]
            assert result, "Prometheus has no GPU reservation series of the last 20 minutes"
            view.locator(".uplot canvas").first.wait_for(timeout=30000)
            legend = view.locator(".u-legend").inner_text()
            assert "Error executing query" not in view.locator("body").inner_text()
            for series in result:
                assert series["metric"]["cluster_queue"] in legend, (series["metric"], legend)
        finally:
            chromium.close()
    assert {urllib.parse.urlsplit(u).hostname for u in sent} == {"127.0.0.1"}, sent
    assert refused == [], refused
