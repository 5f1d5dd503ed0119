"""roles/mig_config/tasks/discover.yml (issue 13, item 1): which GPU Operator pod each node's report is read from,
and which source each node's profiles come from. The k8s tasks need a cluster; the choice of pod and the
bookkeeping after them run here in ansible-playbook on stand-in results."""

import base64
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DISCOVER = os.path.join(ROOT, "roles", "mig_config", "tasks", "discover.yml")
PODS = [{"metadata": {"name": "drv-1", "labels": {"app": "nvidia-driver-daemonset"}}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "mm-1", "labels": {"app": "nvidia-mig-manager"}}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "drv-2", "labels": {"app": "nvidia-driver-daemonset"}}, "spec": {"nodeName": "n2"}}]
RESULTS = [{"item": [{"metadata": {"name": "n1"}}, "mig -lgip"], "rc": 0, "stdout": "LGIP-1"},
           {"item": [{"metadata": {"name": "n1"}}, "mig -lgipp"], "rc": 0, "stdout": "LGIPP-1"},
           {"item": [{"metadata": {"name": "n2"}}, "mig -lgip"], "rc": 6, "stdout": "No MIG-enabled devices found."},
           {"item": [{"metadata": {"name": "n2"}}, "mig -lgipp"], "rc": 1, "stdout": "", "stderr": "exec failed"},
           {"item": [{"metadata": {"name": "n3"}}, "mig -lgip"], "skipped": True},
           {"item": [{"metadata": {"name": "n4"}}, "mig -lgip"], "rc": 0, "stdout": "LGIP-4"}]


def test_discover_picks_the_mig_manager_and_reports_each_source(tmp_path):
    tasks = yaml.safe_load(open(DISCOVER))
    exec_task = next(task for task in tasks if "kubernetes.core.k8s_exec" in task)
    tail = [task for task in tasks if not any(key.startswith("kubernetes.core.") for key in task)]
    pick = {"name": "pick", "ansible.builtin.debug": {"msg": "{{ item.0.metadata.name }}={{ mig_config_report_pod."
                                                             "metadata.name | default('none') }}"},
            "vars": exec_task["vars"], "loop": "{{ mig_config_nodes.resources | product(['-L']) | list }}"}
    show = {"name": "show", "ansible.builtin.debug": {"msg": "REPORTS {{ mig_config_node_reports | to_json | b64encode }}"}}
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {
        "mig_config_namespace": "gpu-operator", "mig_config_node_lgip": {"n3": "USER", "n4": "USER"},
        "mig_config_node_reports": {"n9": {"mig -lgip": "an earlier reading"}},
        "mig_config_nodes": {"resources": [{"metadata": {"name": n}} for n in ("n1", "n2", "n3", "n4")]},
        "mig_config_operator_pods": {"resources": PODS}, "mig_config_report": {"results": RESULTS}},
        "tasks": [pick] + tail + [show]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default")
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), str(path)],
                         capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "n1=mm-1" in text and "n2=drv-2" in text and "n3=none" in text
    assert "node n1: MIG profiles from the node report" in text
    assert 'node n2: MIG profiles from the built-in catalogue (fallback: the node report says "No MIG-enabled' in text
    assert "node n3: MIG profiles from mig_config_node_lgip as given" in text
    assert "node n4: MIG profiles from mig_config_node_lgip as given" in text, "the user's -lgip wins over the report"
    # Every answer is kept, "No MIG-enabled devices found." included; a failed exec is not an answer; an earlier
    # reading is not kept (the role reads again once MIG is on). The user's
    # -lgip is laid over these by plugins/module_utils/mig/nodes.py node_report, not copied into them.
    reports = json.loads(base64.b64decode(text.split("REPORTS ", 1)[1].split()[0].strip('"')))
    assert reports == {"n1": {"mig -lgip": "LGIP-1", "mig -lgipp": "LGIPP-1"},
                       "n2": {"mig -lgip": "No MIG-enabled devices found."}, "n4": {"mig -lgip": "LGIP-4"}}
