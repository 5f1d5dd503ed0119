"""A fleet (issue 16): the roll-out's batches against ansible-core's own, the policy and collision checks, the
fleet report callback on a real ansible-playbook run, and site.yml's check play refusing a fleet whose hosts
collide before any cluster is touched."""

import fcntl
import json
import os
import subprocess
import sys
import time

import pytest
import yaml
from ansible.executor.playbook_executor import PlaybookExecutor

from ansible_collections.fairgpu.tenancy.plugins.module_utils.plan import fleet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


class _Inventory(object):
    def __init__(self, hosts):
        self.hosts = hosts

    def get_hosts(self, pattern, order=None):
        return list(self.hosts)


class _Play(object):
    def __init__(self, serial):
        self.hosts, self.order, self.serial = "all", None, serial


def ansible_batches(hosts, serial):
    """ansible-core's own batches (PlaybookExecutor._get_serialized_batches) for a play with ``serial`` (a list, as
    the play's field holds it after templating)."""
    executor = PlaybookExecutor.__new__(PlaybookExecutor)
    executor._inventory = _Inventory(hosts)
    return executor._get_serialized_batches(_Play(serial))


@pytest.mark.parametrize("serial", [[1, "100%"], [1, "50%"], [1, 2], [2], ["30%"], ["0%"], [0], [1, "0%"], [],
                                    [3, 1], ["50%", "100%"], ["1%"], [1, "34%", "100%"]])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 10])
def test_batches_are_ansibles(serial, count):
    hosts = ["c%d" % index for index in range(count)]
    assert fleet.batches(hosts, serial) == ansible_batches(hosts, serial)


def test_the_documented_rules():
    # A percentage is of all hosts, truncated, at least 1: [1, "50%"] over 3 hosts is 1, 1, 1.
    assert fleet.batches(["a", "b", "c"], [1, "50%"]) == [["a"], ["b"], ["c"]]
    assert fleet.batches(["a", "b", "c", "d"], [1, "50%"]) == [["a"], ["b", "c"], ["d"]]
    assert fleet.batches(["a", "b", "c"], None) == [["a", "b", "c"]]
    assert fleet.batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]


@pytest.mark.parametrize("serial, percent, message", [
    ([], 100, "fleet_serial: an empty list"),
    ([1, "half"], 100, "fleet_serial[1]: 'half' is not a number of hosts or a percentage"),
    (True, 100, "fleet_serial: True is not a number of hosts"),
    ([1, "50%"], 101, "fleet_max_fail_percentage: 101 is not a percentage from 0 to 100"),
    ([1, "50%"], "most", "fleet_max_fail_percentage: 'most' is not a percentage"),
    (["50% "], 100, "fleet_serial[0]: '50% ' is not a number of hosts or a percentage"),  # Ansible's int() fails
    (["\u00b2"], 100, "fleet_serial[0]: "),
])
def test_policy_errors_name_the_variable(serial, percent, message):
    assert any(error.startswith(message) for error in fleet.policy_errors(serial, percent))


def test_a_good_policy_has_no_errors():
    assert fleet.policy_errors([1, "50%"], 0) == [] and fleet.policy_errors("25%", "50") == []
    assert fleet.policy_errors(["2"], "50%") == [], "Ansible takes a percent field's 50% as 50"


def member(host, provider="kwok", name=None, ports=None, apiserver=0, kubeconfig="", context="", data=None):
    return {"host": host, "provider": provider, "cluster_name": name or host, "apiserver_port": apiserver,
            "ports": ports or {}, "kubeconfig": kubeconfig, "context": context, "kubeconfig_data": data}


def kubeconfig(current, **servers):
    return {"current-context": current,
            "contexts": [{"name": name, "context": {"cluster": name + "-cluster"}} for name in servers],
            "clusters": [{"name": name + "-cluster", "cluster": {"server": url}} for name, url in servers.items()]}


def test_collisions_name_both_hosts_and_the_fix():
    prod = kubeconfig("admin", admin="https://prod.example:6443", viewer="https://prod.example:6443/")
    errors = fleet.fleet_errors([
        member("a", name="same", ports={"prometheus": 21090}, apiserver=21443),
        member("b", name="same", ports={"prometheus": 22090}, apiserver=21443),
        member("c", ports={"prometheus": 21090}),
        member("d", "existing", kubeconfig="/k/prod.yaml", context="admin", data=prod),
        # The same server through another context, and the file's current context left implicit.
        member("e", "existing", kubeconfig="/k/prod.yaml", context="viewer", data=prod),
        member("f", "existing", kubeconfig="/k/copy.yaml", data=prod),
        # An existing host pointed at an embedded cluster of the inventory.
        member("g", "existing", kubeconfig="/k/a.yaml", data=kubeconfig("x", x="https://127.0.0.1:21443")),
        # Files that cannot be read (not yet there) are compared by path and context.
        member("h", "existing", kubeconfig="/k/new.yaml", context="c1"),
        member("i", "existing", kubeconfig="/k/new.yaml", context="c1"),
        member("j", "existing", kubeconfig="/k/new.yaml", context="c2"),
    ])
    assert errors == [
        "hosts a and b: both are embedded clusters named 'same' on this machine; give each its own cluster_name",
        "hosts a (lab_cluster_apiserver_port) and b (lab_cluster_apiserver_port): both embedded clusters listen on "
        "127.0.0.1:21443; give each its own ports",
        "hosts a (run_local_ports.prometheus) and c (run_local_ports.prometheus): both embedded clusters listen on "
        "127.0.0.1:21090; give each its own ports",
        "hosts d and e: both reach the cluster https://prod.example:6443; one inventory host is one cluster: remove "
        "one or point it at its own cluster",
        "hosts d and f: both reach the cluster https://prod.example:6443; one inventory host is one cluster: remove "
        "one or point it at its own cluster",
        "hosts a and g: g's kubeconfig reaches https://127.0.0.1:21443, the API server of embedded cluster a; one "
        "inventory host is one cluster: remove one",
        "hosts h and i: both reach the cluster of kubeconfig /k/new.yaml context c1; one inventory host is one "
        "cluster: remove one or point it at its own cluster",
    ]
    # A picked port (0) never collides; a kind and a kwok cluster may share a name.
    assert fleet.fleet_errors([member("a", apiserver=0), member("b", apiserver=0),
                               member("k", "kind", name="a")]) == []


def test_the_inventory_shipped_as_a_fleet_has_no_collision():
    """inventories/fleet-embedded: three embedded clusters, each with its own name and ports."""
    with open(os.path.join(ROOT, "inventories", "fleet-embedded", "hosts.yml")) as handle:
        hosts = yaml.safe_load(handle)["gpu_clusters"]["hosts"]
    members = []
    for host in sorted(hosts):
        with open(os.path.join(ROOT, "inventories", "fleet-embedded", "host_vars", host + ".yml")) as handle:
            variables = yaml.safe_load(handle)
        members.append(member(host, name=variables["cluster_name"], ports=variables["run_local_ports"],
                              apiserver=variables["lab_cluster_apiserver_port"]))
    assert len(members) == 3 and fleet.fleet_errors(members) == []
    assert all(int(port) < 32768 for m in members for port in list(m["ports"].values()) + [m["apiserver_port"]])


def run_playbook(tmp_path, plays, inventory, *args, env=None):
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"), **(env or {}))
    return subprocess.run([PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")] + list(args),
                          capture_output=True, text=True, env=environment, cwd=ROOT, check=False, timeout=300)


LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}


def test_the_fleet_report_callback_on_a_real_run(tmp_path):
    inventory = {"gpu_clusters": {"vars": LOCAL, "hosts": {"east": {}, "west": {}, "north": {}}}}
    plays = [{"hosts": "gpu_clusters", "gather_facts": False, "tasks": [
        {"name": "Publish", "ansible.builtin.set_stats": {"per_host": True, "data": {"fairgpu": {
            "provider": "kwok", "path": "kueue", "kueue_version": "v0.19.2", "tenants": ["team-a 4 nvidia.com/gpu"],
            "run_playbook": "site"}}}},
        {"name": "Write the queues", "ansible.builtin.file": {"path": str(tmp_path / "{{ inventory_hostname }}"),
                                                              "state": "touch"}},
        {"name": "A failure a rescue handles", "block": [{"name": "Trips", "ansible.builtin.fail": {"msg": "caught"}}],
         "rescue": [{"name": "Handled", "ansible.builtin.debug": {"msg": "ok"}}]},
        {"name": "Reach the API server", "ansible.builtin.fail": {"msg": "Connection refused"},
         "when": "inventory_hostname == 'west'"},
        # site.yml's last task; north stands for a cluster a stopped roll-out never finished.
        {"name": "Finish", "ansible.builtin.set_stats": {"per_host": True, "data": {"fairgpu": {"completed": True}}},
         "when": "inventory_hostname != 'north'"},
    ]}]
    run = run_playbook(tmp_path, plays, inventory)
    assert run.returncode != 0 and "Fleet report: %s" % (tmp_path / "fleet" / "report.md") in run.stderr
    report = json.loads((tmp_path / "fleet" / "report.json").read_text())
    assert sorted(report["hosts"]) == ["east", "north", "west"]
    assert report["hosts"]["east"]["changed"] == ["Write the queues"] and report["hosts"]["east"]["failure"] is None
    assert report["hosts"]["west"]["failure"] == {"task": "Reach the API server", "message": "Connection refused"}
    markdown = (tmp_path / "fleet" / "report.md").read_text()
    assert "| east | kwok | kueue | v0.19.2 | team-a 4 nvidia.com/gpu | changed 1: Write the queues | not run |  |" in markdown
    assert "| west | kwok | kueue | v0.19.2 | team-a 4 nvidia.com/gpu | changed 1: Write the queues | not run | " \
           "Reach the API server: Connection refused |" in markdown
    assert "with a failure: north, west." in markdown and "caught" not in markdown
    assert report["hosts"]["north"]["failure"]["task"] == "(not reached)"
    # Under --check the same run is a drift check: what would change. Rows of hosts not in the run are kept.
    run = run_playbook(tmp_path, plays, inventory, "--check", "--limit", "east")
    markdown = (tmp_path / "fleet" / "report.md").read_text()
    assert "| east | kwok | kueue | v0.19.2 | team-a 4 nvidia.com/gpu | would change 1: Write the queues |" in markdown
    assert "Reach the API server: Connection refused" in markdown, "west's row is kept from the earlier run"


def test_the_fleet_report_waits_for_another_run_and_keeps_its_rows(tmp_path):
    """Two runs at once (make test's two lanes) share results/fleet: a run holding report.lock keeps the next one's
    update waiting, and the next one reads the report only then, so the rows the first one wrote stay."""
    inventory = {"gpu_clusters": {"vars": LOCAL, "hosts": {"east": {}}}}
    plays = [{"hosts": "gpu_clusters", "gather_facts": False, "tasks": [
        {"name": "Publish", "ansible.builtin.set_stats": {"per_host": True, "data": {"fairgpu": {
            "provider": "kwok", "run_playbook": "site", "completed": True}}}},
        {"name": "Say the tasks are done",
         "ansible.builtin.file": {"path": str(tmp_path / "tasks-done"), "state": "touch"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "fleet").mkdir()
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"),
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"))
    with open(tmp_path / "fleet" / "report.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = subprocess.Popen([PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, cwd=ROOT)
        deadline = time.monotonic() + 120
        while not (tmp_path / "tasks-done").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)
        assert run.poll() is None, "the run wrote its report without waiting for report.lock: %s" % run.communicate()[1]
        assert not (tmp_path / "fleet" / "report.json").exists()
        # What the other run writes while it holds the lock.
        (tmp_path / "fleet" / "report.json").write_text(json.dumps({"hosts": {"west": {"provider": "existing"}}}))
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    report = json.loads((tmp_path / "fleet" / "report.json").read_text())
    assert sorted(report["hosts"]) == ["east", "west"] and report["hosts"]["west"] == {"provider": "existing"}
    assert sorted(os.listdir(tmp_path / "fleet")) == ["report.json", "report.lock", "report.md"], "no temporary left"


def fleet_inventory(**overrides):
    hosts = {}
    for index, host in enumerate(("fleet-a", "fleet-b")):
        hosts[host] = {"cluster_name": "fairgpu-" + host, "lab_cluster_apiserver_port": 21443 + 1000 * index,
                       "run_local_ports": {"kueue_webhook": 21543 + 1000 * index, "kueue_metrics": 21544 + 1000 * index,
                                           "kueue_health": 21081 + 1000 * index, "prometheus": 21090 + 1000 * index,
                                           "dcgm_exporter": 21400 + 1000 * index,
                                           "kube_state_metrics": 21480 + 1000 * index,
                                           "kube_state_metrics_telemetry": 21490 + 1000 * index}}
        hosts[host].update(overrides.get(host, {}))
    return {"gpu_clusters": {"vars": LOCAL, "hosts": hosts}}


def test_site_refuses_a_fleet_whose_hosts_are_one_cluster_before_touching_any(tmp_path):
    """site.yml's check play over the whole inventory (no cluster is reached: it starts none, reads none)."""
    inventory = fleet_inventory(**{"fleet-b": {"cluster_name": "fairgpu-fleet-a", "run_local_ports": {
        "kueue_webhook": 21543, "kueue_metrics": 22544, "kueue_health": 22081, "prometheus": 22090,
        "dcgm_exporter": 22400, "kube_state_metrics": 22480, "kube_state_metrics_telemetry": 22490}}})
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"), HOME=str(tmp_path))
    run = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), os.path.join(ROOT, "playbooks", "site.yml"),
                          "-e", json.dumps({"fleet_serial": [1, "50%"]})],
                         capture_output=True, text=True, env=environment, cwd=ROOT, check=False, timeout=300)
    out = " ".join(run.stdout.split())
    assert run.returncode != 0
    assert "hosts fleet-a and fleet-b: both are embedded clusters named 'fairgpu-fleet-a'" in out
    assert "hosts fleet-a (run_local_ports.kueue_webhook) and fleet-b (run_local_ports.kueue_webhook): both " \
           "embedded clusters listen on 127.0.0.1:21543" in out
    assert "PLAY [Set up multi-tenant GPU scheduling]" not in run.stdout, "no cluster is touched"
    assert not (tmp_path / ".local" / "share" / "fairgpu" / "kwok").exists()


def test_site_refuses_a_bad_roll_out_policy(tmp_path):
    inventory = fleet_inventory()
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"), HOME=str(tmp_path))
    base = [PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), os.path.join(ROOT, "playbooks", "site.yml")]
    run = subprocess.run(base + ["-e", json.dumps({"fleet_serial": [1, "half"]})], capture_output=True, text=True,
                         env=environment, cwd=ROOT, check=False, timeout=300)
    assert run.returncode != 0 and "fleet_serial[1]: 'half' is not a number of hosts" in run.stdout
    assert "PLAY [Set up multi-tenant GPU scheduling]" not in run.stdout


def test_site_refuses_two_existing_hosts_that_reach_one_api_server(tmp_path):
    """The kubeconfigs are read in the check play: two files, one spelled with '..', the second host's context
    left to the file's current context; both reach https://prod.example:6443."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "admin",
              "clusters": [{"name": "prod", "cluster": {"server": "https://prod.example:6443"}}],
              "contexts": [{"name": "admin", "context": {"cluster": "prod", "user": "u"}}],
              "users": [{"name": "u", "user": {"token": "x"}}]}
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "prod.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "kube" / "copy.yaml").write_text(yaml.safe_dump(config))
    inventory = {"gpu_clusters": {"vars": LOCAL, "hosts": {
        "prod-eu": {"cluster_provider": "existing", "cluster_kubeconfig": str(tmp_path / "kube" / ".." / "kube" / "prod.yaml"),
                    "cluster_context": "admin"},
        "prod-eu-again": {"cluster_provider": "existing", "cluster_kubeconfig": str(tmp_path / "kube" / "copy.yaml")}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"))
    run = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), os.path.join(ROOT, "playbooks", "site.yml")],
                         capture_output=True, text=True, env=environment, cwd=ROOT, check=False, timeout=300)
    out = " ".join(run.stdout.split())
    assert run.returncode != 0
    assert "hosts prod-eu and prod-eu-again: both reach the cluster https://prod.example:6443" in out, out[-3000:]
    assert "PLAY [Set up multi-tenant GPU scheduling]" not in run.stdout


def closed_port_kubeconfig(path, port):
    """A kubeconfig whose API server is a closed loopback port (nothing listens on 127.0.0.1:<port>)."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "closed",
        "clusters": [{"name": "closed", "cluster": {"server": "https://127.0.0.1:%d" % port,
                                                    "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "closed", "context": {"cluster": "closed", "user": "closed"}}],
        "users": [{"name": "closed", "user": {"token": "x"}}]}))
    return str(path)


def test_the_drift_check_checks_every_cluster_and_names_those_not_checked(tmp_path):
    """site.yml --check over three existing clusters: the canary's API server does not answer, the second's
    kubeconfig is not there, the third's API server does not answer either. Every one is tried (not stopped at the
    canary, as a roll-out is), and each row says "not checked" with its reason, never "nothing"."""
    inventory = {"gpu_clusters": {"vars": LOCAL, "hosts": {
        "canary": {"cluster_provider": "existing", "cluster_api_timeout": 2,
                   "cluster_kubeconfig": closed_port_kubeconfig(tmp_path / "canary.yaml", 1)},
        "lost": {"cluster_provider": "existing", "cluster_api_timeout": 2,
                 "cluster_kubeconfig": str(tmp_path / "no-such-kubeconfig.yaml")},
        "other": {"cluster_provider": "existing", "cluster_api_timeout": 2,
                  "cluster_kubeconfig": closed_port_kubeconfig(tmp_path / "other.yaml", 9)}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       FAIRGPU_FLEET_REPORT_DIR=str(tmp_path / "fleet"), HOME=str(tmp_path))
    base = [PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), os.path.join(ROOT, "playbooks", "site.yml"),
            "-e", json.dumps({"fleet_serial": [1, "100%"], "fleet_max_fail_percentage": 0})]
    run = subprocess.run(base + ["--check", "--diff"], capture_output=True, text=True, env=environment, cwd=ROOT,
                         check=False, timeout=300)
    assert run.returncode != 0
    report = json.loads((tmp_path / "fleet" / "report.json").read_text())["hosts"]
    assert sorted(report) == ["canary", "lost", "other"]
    for host in ("canary", "other"):
        assert report[host]["check_mode"] and report[host]["not_checked"].startswith(
            "fairgpu.tenancy.cluster : "), report[host]
        assert "cluster_kubeconfig: the API server of %s" % inventory["gpu_clusters"]["hosts"][host][
            "cluster_kubeconfig"] in report[host]["not_checked"], report[host]
    assert "no-such-kubeconfig.yaml" in report["lost"]["not_checked"], report["lost"]
    markdown = (tmp_path / "fleet" / "report.md").read_text()
    assert "Not checked (--check): canary, lost, other." in markdown
    assert "| nothing |" not in markdown
    assert markdown.count("| not checked | not run | fairgpu.tenancy.") == 3
    # The same fleet rolled out for real stops at the canary: the other two are never reached.
    run = subprocess.run(base, capture_output=True, text=True, env=environment, cwd=ROOT, check=False, timeout=300)
    assert run.returncode != 0
    report = json.loads((tmp_path / "fleet" / "report.json").read_text())["hosts"]
    assert report["other"]["failure"]["task"] == "(not reached)" and report["other"]["not_checked"] is None


def test_a_cluster_the_drift_check_did_not_check_is_never_nothing():
    hosts = {"a": {"changed": [], "check_mode": True, "not_checked": None, "failure": None},
             "b": {"changed": [], "check_mode": True, "failure": {"task": "Connect", "message": "refused"},
                   "not_checked": fleet.not_checked_reason({"task": "Connect", "message": "refused"})},
             "c": {"changed": [], "check_mode": False, "failure": {"task": "Connect", "message": "refused"},
                   "not_checked": None}}
    rows = dict((row["cluster"], row) for row in fleet.report_rows(hosts))
    assert (rows["a"]["changed"], rows["b"]["changed"], rows["c"]["changed"]) == ("nothing", "not checked", "nothing")
    assert rows["b"]["failure"] == "Connect: refused"
    assert "Not checked (--check): b." in fleet.report_markdown(hosts, "site.yml", "now")
    assert fleet.not_checked_reason(None) is None
