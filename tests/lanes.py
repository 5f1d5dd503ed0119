"""make test's scheduler: lanes of make targets run at the same time, the targets of one lane one after another.

    python tests/lanes.py "integration-shared molecule" "unit lint rules integration-own"

Each argument is a lane: make targets separated by spaces. A lane stops at its first failing target, as make does;
the other lanes go on. Every line a target prints is printed with the target's name in front ("[unit] ...") and kept
whole in results/tests/<target>.log. At the end a table gives each target's exit status and minutes, then, for each
failed target, the lines of its log that say why (pytest's short test summary, or the log's last lines): the lanes'
output is interleaved, and CI keeps only its tail. The exit status is 0 only when every target passed.

Why lanes are safe here (docs/testing.md "Two lanes at once"): the integration files that bring an embedded
cluster of their own (marked own_cluster) run in one lane, the shared cluster's files in the other, and each
cluster has its own name, ports and state directory; the roles order cluster creations through one lock
(lab_cluster_create_lock) and the fleet report through another (fleet_report's report.lock).

On SIGINT or SIGTERM every running target gets SIGINT (pytest then runs its fixtures' teardown, which deletes the
clusters), and after 120 s SIGKILL.

One make test at a time on a machine: the tests' clusters have fixed names and ports, and their state lives under
~/.local/share/fairgpu whichever checkout runs them, so a second run would adopt the first one's clusters. lanes.py
holds an exclusive lock (~/.local/share/fairgpu/make-test.lock) for its whole run and refuses to start while another
holds it. Every process it starts carries FAIRGPU_MAKE_TEST in its environment, and kwokctl's and local_service's
daemons inherit it (kwokctl starts its components with ``cmd.Env = append(os.Environ(), ...)``,
sigs.k8s.io/kwok@v0.8.0 pkg/utils/exec/exec.go). A run killed outright (its session ended, SIGKILL) leaves those
daemons running with no lock held: the next run finds them by the mark, tears their clusters down with teardown.yml
and stops what is left, before any test starts (docs/testing.md "Two lanes at once").
"""

import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "results", "tests")
GRACE = 120
STATE_DIR = os.path.expanduser("~/.local/share/fairgpu")
MACHINE_LOCK = os.path.join(STATE_DIR, "make-test.lock")
MARK = "FAIRGPU_MAKE_TEST"
# A kwokctl cluster's directory in a process's command line: <run_state_dir>/kwok/clusters/<cluster_name>/...
CLUSTER_DIR = re.compile(r"(/[^\s=:,]+)/kwok/clusters/([^/\s=:,]+)/")


class Lane(threading.Thread):
    """One lane: runs ``targets`` in order with ``make``; ``results`` gets (target, rc, start, seconds) each."""

    def __init__(self, targets, printer, started):
        super().__init__(daemon=True)
        self.targets = targets
        self.printer = printer
        self.started = started
        self.results = []
        self.process = None

    def run(self):
        for target in self.targets:
            start = time.monotonic()
            rc = self.make(target)
            self.results.append((target, rc, start - self.started, time.monotonic() - start))
            if rc != 0:
                break

    def make(self, target):
        with open(os.path.join(LOGS, target + ".log"), "w") as log:
            # COLUMNS: pytest cuts its short summary to the terminal's width, 80 through a pipe, which drops the
            # message of every failure whose test name is long; these lines are what why_it_failed prints.
            self.process = subprocess.Popen(["make", "--no-print-directory", target], cwd=ROOT, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                            errors="replace", bufsize=1, start_new_session=True,
                                            env=dict(os.environ, COLUMNS="400"))
            for line in self.process.stdout:
                log.write(line)
                log.flush()
                self.printer("[%s] %s" % (target, line.rstrip("\n")))
            return self.process.wait()

    def interrupt(self, sig):
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass


def hold_the_machine():
    """The machine's make-test lock, held until this process exits; None when another make test holds it."""
    os.makedirs(STATE_DIR, exist_ok=True)
    handle = open(MACHINE_LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        sys.stderr.write("lanes: another make test holds %s (%s); its clusters have the names and ports this one "
                         "would use. Wait for it, or stop it (it tears its clusters down on SIGINT).\n"
                         % (MACHINE_LOCK, handle.read().strip() or "no owner written"))
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write("pid %d, %s\n" % (os.getpid(), ROOT))
    handle.flush()
    return handle


def marked_processes():
    """{pid: command line} of the processes whose environment carries MARK, this one excluded."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as handle:
                if not any(item.startswith(MARK.encode() + b"=") for item in handle.read().split(b"\0")):
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                found[int(name)] = " ".join(a.decode(errors="replace") for a in handle.read().split(b"\0") if a)
        except OSError:
            continue
    return found


def clear_what_an_interrupted_run_left(printer):
    """Tear down the clusters of the marked processes an earlier, killed make test left (the lock is ours, so no
    make test owns them), then stop every marked process still running. Returns the clusters torn down."""
    left = marked_processes()
    if not left:
        return []
    clusters = sorted(set(m.groups() for cmdline in left.values() for m in CLUSTER_DIR.finditer(cmdline)))
    printer("lanes: %d processes of an interrupted make test are still running (pids %s); tearing down their "
            "clusters: %s" % (len(left), " ".join(str(pid) for pid in sorted(left)),
                              ", ".join("%s (%s)" % (name, state) for state, name in clusters) or "none found"))
    env = dict((key, value) for key, value in os.environ.items() if key != MARK)
    env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    for state, name in clusters:
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                               os.path.join(ROOT, "playbooks", "teardown.yml"),
                               "-e", "@" + os.path.join(ROOT, "tests", "integration", "vars.yml"),
                               "-e", "cluster_name=%s run_state_dir=%s" % (name, state)],
                              cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        said = "" if proc.returncode == 0 else "\n" + (proc.stdout + proc.stderr)[-2000:]
        printer("lanes: teardown.yml of %s: rc %d%s" % (name, proc.returncode, said))
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        still = marked_processes()
        for pid in still:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while still and time.monotonic() < deadline:
            time.sleep(0.5)
            still = marked_processes()
        if not still:
            break
    still = marked_processes()
    if still:
        printer("lanes: still running after SIGKILL: %s" % still)
    return clusters


def why_it_failed(path, most=40):
    """The lines of a failed target's log that say why: pytest's "short test summary info" section (one line per
    failed or erroring test, with its message) where there is one, else the log's last ``most`` lines."""
    try:
        with open(path, errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as err:
        return ["(no log: %s)" % err]
    starts = [i for i, line in enumerate(lines) if "short test summary info" in line]
    if starts:
        summary = lines[starts[-1] + 1:]
        picked = [line for line in summary if line.startswith(("FAILED", "ERROR"))]
        return (picked or summary)[:most]
    return lines[-most:]


def main(argv):
    lanes_targets = [arg.split() for arg in argv if arg.split()]
    if not lanes_targets:
        sys.stderr.write(__doc__)
        return 2
    every = [target for targets in lanes_targets for target in targets]
    twice = sorted(set(target for target in every if every.count(target) > 1))
    if twice:
        sys.stderr.write("lanes: %s in two lanes; a target runs in one lane only\n" % ", ".join(twice))
        return 2
    os.makedirs(LOGS, exist_ok=True)
    lock = threading.Lock()

    def printer(line):
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    machine = hold_the_machine()
    if machine is None:
        return 2
    clear_what_an_interrupted_run_left(printer)
    os.environ[MARK] = "pid %d" % os.getpid()

    started = time.monotonic()
    lanes = [Lane(targets, printer, started) for targets in lanes_targets]
    stopping = []

    def stop(signum, _frame):
        if stopping:
            return
        stopping.append(signum)
        printer("lanes: signal %d, interrupting every running target (SIGKILL after %d s)" % (signum, GRACE))
        for lane in lanes:
            lane.interrupt(signal.SIGINT)
        killer = threading.Timer(GRACE, lambda: [lane.interrupt(signal.SIGKILL) for lane in lanes])
        killer.daemon = True
        killer.start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    printer("lanes: %s" % " | ".join(" ".join(targets) for targets in lanes_targets))
    for lane in lanes:
        lane.start()
    while any(lane.is_alive() for lane in lanes):
        for lane in lanes:
            lane.join(0.5)
    wall = time.monotonic() - started
    failed = False
    printer("")
    printer("lanes: %-20s %4s %8s %8s  %s" % ("target", "rc", "start", "minutes", "log"))
    for number, lane in enumerate(lanes, 1):
        ran = dict((target, (rc, start, seconds)) for target, rc, start, seconds in lane.results)
        for target in lane.targets:
            if target in ran:
                rc, start, seconds = ran[target]
                failed = failed or rc != 0
                printer("lanes: %-20s %4d %8.1f %8.1f  results/tests/%s.log  (lane %d)"
                        % (target, rc, start / 60, seconds / 60, target, number))
            else:
                failed = True
                printer("lanes: %-20s %4s %8s %8s  (lane %d stopped before it)" % (target, "-", "-", "-", number))
    for lane in lanes:
        for target, rc, _start, _seconds in lane.results:
            if rc != 0:
                printer("lanes: why %s failed (rc %d):" % (target, rc))
                for line in why_it_failed(os.path.join(LOGS, target + ".log")):
                    printer("lanes:   %s" % line)
    printer("lanes: %.1f minutes in all; %s" % (wall / 60, "every target passed" if not failed else "FAILED"))
    return 1 if failed or stopping else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
