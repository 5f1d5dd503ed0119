"""make test's scheduler: lanes of make targets run at the same time, the targets of one lane one after another.

    python tests/lanes.py "integration-shared molecule" "unit lint rules integration-own"

Each argument is a lane: make targets separated by spaces. A lane stops at its first failing target, as make does;
the other lanes go on. Every line a target prints is printed with the target's name in front ("[unit] ...") and kept
whole in results/tests/<target>.log. At the end a table gives each target's exit status and minutes, and the exit
status is 0 only when every target passed.

Why lanes are safe here (docs/testing.md "Two lanes at once"): the integration files that bring an embedded
cluster of their own (marked own_cluster) run in one lane, the shared cluster's files in the other, and each
cluster has its own name, ports and state directory; the roles order cluster creations through one lock
(lab_cluster_create_lock) and the fleet report through another (fleet_report's report.lock).

On SIGINT or SIGTERM every running target gets SIGINT (pytest then runs its fixtures' teardown, which deletes the
clusters), and after 120 s SIGKILL.
"""

import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "results", "tests")
GRACE = 120


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
            self.process = subprocess.Popen(["make", "--no-print-directory", target], cwd=ROOT, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                            errors="replace", bufsize=1, start_new_session=True)
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
    printer("lanes: %.1f minutes in all; %s" % (wall / 60, "every target passed" if not failed else "FAILED"))
    return 1 if failed or stopping else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
