"""Nothing of an embedded cluster dials off the machine (issue 25, item 8): a watcher that samples, in a background
thread, the TCP and UDP sockets of every process of the embedded clusters and records each one connected to an
address outside the loopback range.

Linux only, from /proc (proc(5), https://man7.org/linux/man-pages/man5/proc.5.html):

- ``/proc/<pid>/net/{tcp,tcp6,udp,udp6}``: the sockets of the process's network namespace, one per line after a
  header: ``sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...``.
  An address is ``HEX:PORT``: the IPv4 address as the kernel's 32-bit word printed with ``%08X`` (so
  127.0.0.1 reads ``0100007F`` on a little-endian machine), IPv6 as four such words; the port in hex
  (net/ipv4/tcp_ipv4.c ``get_tcp4_sock``, net/ipv6/tcp_ipv6.c ``get_tcp6_sock``). ``st`` is the state of
  include/net/tcp_states.h: 01 ESTABLISHED, 02 SYN_SENT, 03 SYN_RECV, ..., 0A LISTEN (UDP: 07 unconnected,
  01 connected).
- ``/proc/<pid>/fd/*``: links ``socket:[<inode>]`` name the sockets a process holds; the inode ties a line of
  net/tcp to its process.

A process is the embedded cluster's when its executable lies in the toolchain cache (``FAIRGPU_CACHE`` or
``~/.cache/fairgpu``: kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok, kwokctl, kueue,
prometheus, prometheus-operator, helm, promtool, kube-state-metrics), its executable's or first argument's name is one of ``NAMES``, or
its command line runs one of the simulated node scripts (``SCRIPTS``). A sample costs a scan of /proc/*/cmdline
and the fd links of the matched processes (a few milliseconds); a process that lives less than the interval
(a short helm call) can be missed.
"""

import os
import socket
import struct
import threading
import time

# TCP states that hold a connection (every state but LISTEN 0A and CLOSE 07), include/net/tcp_states.h.
TCP_CONNECTED = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
                 "06": "TIME_WAIT", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}
UDP_CONNECTED = {"01": "ESTABLISHED"}
TABLES = (("tcp", socket.AF_INET, TCP_CONNECTED), ("tcp6", socket.AF_INET6, TCP_CONNECTED),
          ("udp", socket.AF_INET, UDP_CONNECTED), ("udp6", socket.AF_INET6, UDP_CONNECTED))
NAMES = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-controller",
         "kwokctl", "kueue", "prometheus", "prometheus-operator", "helm", "promtool", "kube-state-metrics", "percli",
         "chromium")
SCRIPTS = ("kubelet_sim.py", "dcgm_exporter_sim.py", "mig_manager_sim.py", "dashboard_server.py")


def decode_address(text, family):
    """``(address, port)`` of a net/tcp address ``HEX:PORT`` (``family`` AF_INET or AF_INET6)."""
    host, port = text.split(":")
    words = [int(host[i:i + 8], 16) for i in range(0, len(host), 8)]
    packed = struct.pack("=%dI" % len(words), *words)
    return socket.inet_ntop(family, packed), int(port, 16)


def is_loopback(address):
    """127.0.0.0/8, ::1, and IPv4-mapped 127.x (::ffff:127.0.0.1); the unspecified address (no peer) counts too."""
    if address in ("0.0.0.0", "::", "::1"):
        return True
    if address.startswith("::ffff:"):
        address = address[len("::ffff:"):]
    return address.startswith("127.")


def parse_table(text, family, connected):
    """The connected sockets of one net/{tcp,udp}{,6} text: ``[{"local", "remote", "port", "state", "inode"}]``
    (the header line and unconnected or listening sockets left out)."""
    sockets = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] not in connected:
            continue
        local = decode_address(fields[1], family)[0]
        remote, port = decode_address(fields[2], family)
        sockets.append({"local": local, "remote": remote, "port": port, "state": connected[fields[3]],
                        "inode": int(fields[9])})
    return sockets


def off_machine(sockets):
    """The sockets of ``parse_table`` whose peer is outside the loopback range."""
    return [s for s in sockets if not is_loopback(s["remote"])]


def is_cluster_process(exe, argv, cache):
    """Whether a process (``exe``: its /proc/<pid>/exe target or "", ``argv``: its command line) is one of the
    embedded cluster's (see the module's docstring). ``cache``: the toolchain cache directory."""
    if exe and cache and exe.startswith(cache.rstrip("/") + "/"):
        return True
    names = {os.path.basename(exe or "")}
    if argv:
        names.add(os.path.basename(argv[0]))
    if names & set(NAMES):
        return True
    return any(os.path.basename(arg) in SCRIPTS for arg in argv[1:3])


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def _link(path):
    try:
        return os.readlink(path)
    except OSError:
        return ""


def cluster_processes(cache, proc="/proc", skip=()):
    """``{pid: argv}`` of the embedded cluster's processes now."""
    found = {}
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) in skip:
            continue
        raw = _read(os.path.join(proc, entry, "cmdline"))
        if not raw:
            continue
        argv = [a for a in raw.split("\0") if a]
        if argv and is_cluster_process(_link(os.path.join(proc, entry, "exe")), argv, cache):
            found[int(entry)] = argv
    return found


def socket_inodes(pid, proc="/proc"):
    """The inodes of the sockets ``pid`` holds (its fd links ``socket:[N]``)."""
    inodes = set()
    fd_dir = os.path.join(proc, str(pid), "fd")
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return inodes
    for fd in fds:
        target = _link(os.path.join(fd_dir, fd))
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def sample(cache, proc="/proc", skip=(), seen=None):
    """One sample: ``[{"pid", "process", "remote", "port", "state", "proto"}]``, every socket of an embedded
    cluster's process connected off the machine. ``seen``: a set that gets the names of the processes watched."""
    processes = cluster_processes(cache, proc, skip)
    if seen is not None:
        seen.update(os.path.basename(argv[1] if os.path.basename(argv[0]).startswith("python") and len(argv) > 1
                                     else argv[0]) for argv in processes.values())
    if not processes:
        return []
    tables = {}
    offences = []
    for pid, argv in sorted(processes.items()):
        inodes = socket_inodes(pid, proc)
        if not inodes:
            continue
        netns = _link(os.path.join(proc, str(pid), "ns", "net")) or str(pid)
        if netns not in tables:
            rows = []
            for name, family, connected in TABLES:
                text = _read(os.path.join(proc, str(pid), "net", name))
                rows.extend(dict(s, proto=name) for s in off_machine(parse_table(text or "", family, connected)))
            tables[netns] = rows
        for row in tables[netns]:
            if row["inode"] in inodes:
                offences.append({"pid": pid, "process": " ".join(argv).replace("\n", " ")[:200],
                                 "remote": row["remote"], "port": row["port"], "state": row["state"],
                                 "proto": row["proto"]})
    return offences


def describe(offence):
    return "%s pid %d (%s): %s %s:%d" % (offence["proto"], offence["pid"], offence["process"], offence["state"],
                                         offence["remote"], offence["port"])


class Watcher(threading.Thread):
    """Samples every ``interval`` seconds until ``stop()``; ``offences`` holds each distinct one seen (process,
    pid, address), in the order seen; ``seen`` the names of the processes it watched (so a run shows that it
    watched the cluster at all)."""

    def __init__(self, cache, interval=1.0, proc="/proc"):
        super(Watcher, self).__init__(name="fairgpu-socket-watcher", daemon=True)
        self.cache, self.interval, self.proc = cache, interval, proc
        self.offences, self.samples, self.errors, self.seen = [], 0, [], set()
        self._seen = set()
        self._stop_event = threading.Event()

    def run(self):
        skip = {os.getpid()}
        while not self._stop_event.is_set():
            try:
                for offence in sample(self.cache, self.proc, skip, self.seen):
                    key = (offence["pid"], offence["remote"], offence["port"], offence["proto"])
                    if key not in self._seen:
                        self._seen.add(key)
                        self.offences.append(offence)
            except Exception as error:  # pylint: disable=broad-except
                if len(self.errors) < 5:
                    self.errors.append(repr(error))
            self.samples += 1
            self._stop_event.wait(self.interval)

    def stop(self):
        self._stop_event.set()
        self.join(timeout=10)
        return self.offences


def toolchain_cache():
    """Where the toolchain's binaries are (files/lab/toolchain/toolchain.sh: FAIRGPU_CACHE, else ~/.cache/fairgpu)."""
    return os.path.realpath(os.environ.get("FAIRGPU_CACHE") or os.path.expanduser("~/.cache/fairgpu"))


def started():
    """A running Watcher of this machine's toolchain cache."""
    watcher = Watcher(toolchain_cache())
    watcher.start()
    time.sleep(0)
    return watcher
