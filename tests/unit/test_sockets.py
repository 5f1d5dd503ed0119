"""The integration suite's socket watcher (tests/integration/sockets.py): /proc/net parsing on lines in the kernel's
format (proc(5); net/ipv4/tcp_ipv4.c get_tcp4_sock, net/ipv6/tcp_ipv6.c get_tcp6_sock, net/ipv4/udp.c
udp4_format_sock) and a fake /proc where a cluster process holds a connection off the machine."""

import importlib.util
import os
import socket
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = importlib.util.spec_from_file_location("fairgpu_it_sockets", os.path.join(HERE, "..", "integration", "sockets.py"))
sockets = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sockets)

pytestmark = pytest.mark.skipif(sys.byteorder != "little", reason="the sample lines are a little-endian machine's")

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7D84 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D2F0 0100007F:0949 01 00000000:00000000 02:000A7F4C 00000000     0        0 41002 2 0000000000000000 20 4 30 10 -1
   2: 0F02000A:A1B2 010200C0:01BB 02 00000001:00000000 01:00000064 00000002     0        0 41003 2 0000000000000000 200 0 0 1 7
   3: 0F02000A:A1B4 22D8B8AC:01BB 01 00000000:00000000 02:00000DC6 00000000     0        0 41004 2 0000000000000000 20 4 28 10 -1
"""
# Lines of /proc/net/tcp6 as the kernel writes them, each split in two here only for the line length.
TCP6 = "".join(head + tail + "\n" for head, tail in [
    ("  sl  local_address                         remote_address                        st tx_queue rx_queue ",
     "tr tm->when retrnsmt   uid  timeout inode"),
    ("   0: 00000000000000000000000001000000:1F90 00000000000000000000000001000000:C350 01 00000000:00000000 ",
     "00:00000000 00000000     0        0 42001 1 0000000000000000 20 4 30 10 -1"),
    ("   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:C351 01 00000000:00000000 ",
     "00:00000000 00000000     0        0 42002 1 0000000000000000 20 4 30 10 -1"),
    ("   2: 0000000000000000FFFF00000F02000A:C352 0000000000000000FFFF0000010200C0:01BB 02 00000000:00000000 ",
     "00:00000000 00000000     0        0 42003 1 0000000000000000 20 4 30 10 -1"),
    ("   3: B80D0120000000000000000001000000:C353 B80D0120000000000000000002000000:01BB 01 00000000:00000000 ",
     "00:00000000 00000000     0        0 42004 1 0000000000000000 20 4 30 10 -1"),
])
UDP = """\
   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 43001 2 0000000000000000 0
  101: 0F02000A:D431 08080808:0035 01 00000000:00000000 00:00000000 00000000     0        0 43002 2 0000000000000000 0
"""


def test_decode_addresses():
    assert sockets.decode_address("0100007F:7D84", socket.AF_INET) == ("127.0.0.1", 32132)
    assert sockets.decode_address("010200C0:01BB", socket.AF_INET) == ("192.0.2.1", 443)
    assert sockets.decode_address("00000000000000000000000001000000:1F90", socket.AF_INET6) == ("::1", 8080)
    assert sockets.decode_address("0000000000000000FFFF00000100007F:1F90", socket.AF_INET6) == ("::ffff:127.0.0.1", 8080)
    assert sockets.decode_address("B80D0120000000000000000002000000:01BB", socket.AF_INET6) == ("2001:db8::2", 443)


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("127.200.0.7", True), ("::1", True), ("::ffff:127.0.0.1", True), ("0.0.0.0", True),
    ("192.0.2.1", False), ("10.96.0.1", False), ("::ffff:192.0.2.1", False), ("2001:db8::2", False),
    ("128.0.0.1", False)])
def test_loopback(address, loopback):
    assert sockets.is_loopback(address) is loopback


def test_parse_and_judge_the_tables():
    tcp = sockets.parse_table(TCP, socket.AF_INET, sockets.TCP_CONNECTED)
    # The listener (0A) is left out; the loopback connection stays until judged.
    assert [(s["remote"], s["port"], s["state"], s["inode"]) for s in tcp] == [
        ("127.0.0.1", 2377, "ESTABLISHED", 41002), ("192.0.2.1", 443, "SYN_SENT", 41003),
        ("172.184.216.34", 443, "ESTABLISHED", 41004)]
    assert [s["inode"] for s in sockets.off_machine(tcp)] == [41003, 41004]
    tcp6 = sockets.off_machine(sockets.parse_table(TCP6, socket.AF_INET6, sockets.TCP_CONNECTED))
    assert [(s["remote"], s["state"]) for s in tcp6] == [("::ffff:192.0.2.1", "SYN_SENT"), ("2001:db8::2", "ESTABLISHED")]
    udp = sockets.off_machine(sockets.parse_table(UDP, socket.AF_INET, sockets.UDP_CONNECTED))
    assert [(s["remote"], s["port"]) for s in udp] == [("8.8.8.8", 53)]


@pytest.mark.parametrize("exe, argv, cluster", [
    ("/root/.cache/fairgpu/kubernetes-v1.36.3/bin/kube-apiserver", ["kube-apiserver", "--etcd-servers=x"], True),
    ("/usr/bin/python3.11", ["python3", "/s/lib/ansible_collections/fairgpu/tenancy/files/lab/kubelet_sim.py"], True),
    ("/usr/bin/python3.11", ["python3", "/x/files/lab/dcgm_exporter_sim.py", "--port=1"], True),
    ("/opt/helm/helm", ["helm", "upgrade", "--install"], True),
    ("/usr/bin/curl", ["curl", "https://example.com"], False),
    ("/usr/bin/python3.11", ["python3", "-m", "pytest", "kubelet_sim.py"], False),
])
def test_which_processes_are_the_clusters(exe, argv, cluster):
    assert sockets.is_cluster_process(exe, argv, "/root/.cache/fairgpu") is cluster


def fake_proc(tmp_path, pid, argv, exe, inodes, tcp):
    base = tmp_path / str(pid)
    (base / "fd").mkdir(parents=True)
    (base / "net").mkdir()
    (base / "ns").mkdir()
    (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    os.symlink(exe, str(base / "exe"))
    os.symlink("net:[4026531840]", str(base / "ns" / "net"))
    for number, inode in enumerate(inodes):
        os.symlink("socket:[%d]" % inode, str(base / "fd" / str(number + 3)))
    (base / "net" / "tcp").write_text(tcp)
    for name in ("tcp6", "udp", "udp6"):
        (base / "net" / name).write_text("  sl  local_address rem_address   st\n")


def test_a_sample_names_the_process_pid_and_address(tmp_path):
    cache = str(tmp_path / "cache")
    fake_proc(tmp_path, 4242, [cache + "/kueue-v0.19.2/bin/kueue", "--config=/c"], cache + "/kueue-v0.19.2/bin/kueue",
              [41002, 41003], TCP)
    # Another process holds the other off-machine socket: not the cluster's, not reported.
    fake_proc(tmp_path, 4343, ["curl", "https://example.com"], "/usr/bin/curl", [41004], TCP)
    [offence] = sockets.sample(cache, str(tmp_path))
    assert (offence["pid"], offence["remote"], offence["port"], offence["state"]) == (4242, "192.0.2.1", 443, "SYN_SENT")
    expected = "tcp pid 4242 (" + cache + "/kueue-v0.19.2/bin/kueue --config=/c): SYN_SENT 192.0.2.1:443"
    assert sockets.describe(offence).startswith(expected)


def test_the_watcher_records_each_offence_once(tmp_path):
    cache = str(tmp_path / "cache")
    fake_proc(tmp_path, 4242, ["helm", "pull"], "/opt/helm", [41003], TCP)
    watcher = sockets.Watcher(cache, interval=0.01, proc=str(tmp_path))
    watcher.start()
    while watcher.samples < 3:
        pass
    offences = watcher.stop()
    assert [(o["pid"], o["remote"]) for o in offences] == [(4242, "192.0.2.1")] and watcher.errors == []


def test_this_machine_samples_cheaply():
    import time
    start = time.monotonic()
    sockets.sample(sockets.toolchain_cache())
    assert time.monotonic() - start < 0.5


def test_the_watcher_names_what_it_watched(tmp_path):
    cache = str(tmp_path / "cache")
    fake_proc(tmp_path, 4242, [cache + "/kubernetes/bin/kube-apiserver"], cache + "/kubernetes/bin/kube-apiserver", [], TCP)
    fake_proc(tmp_path, 4343, ["/usr/bin/python3", "/x/files/lab/kubelet_sim.py"], "/usr/bin/python3.11", [], TCP)
    seen = set()
    assert sockets.sample(cache, str(tmp_path), seen=seen) == []
    assert seen == {"kube-apiserver", "kubelet_sim.py"}
