"""teardown.yml removes the embedded cluster and Kueue: no process, no port, no cluster files; cache kept."""

import os
import socket

import yaml

from conftest import CLUSTER, KUBECONFIG, KWOK_WORKDIR, playbook


def live_processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((pid, cmdline[:120]))
    return found


def port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_teardown_leaves_nothing(cluster):
    with open(KUBECONFIG) as handle:
        server = yaml.safe_load(handle)["clusters"][0]["cluster"]["server"]
    api_port = int(server.rsplit(":", 1)[1])
    assert port_open(api_port) and port_open(29443) and port_open(29090) and port_open(29400)
    run = playbook("teardown.yml")
    assert run.rc == 0, run.messages()
    assert live_processes_mentioning("/clusters/%s/" % CLUSTER) == []
    assert live_processes_mentioning("kueue/%s/config.yaml" % CLUSTER) == []
    assert live_processes_mentioning("monitoring/%s/" % CLUSTER) == []
    assert not port_open(api_port) and not port_open(29443) and not port_open(28081)
    assert not port_open(29090) and not port_open(29400)
    assert not os.path.exists(os.path.join(KWOK_WORKDIR, "clusters", CLUSTER))
    again = playbook("teardown.yml")
    assert again.rc == 0 and again.stats["changed"] == 0
