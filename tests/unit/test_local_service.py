"""The module local_service and plugins/module_utils/lab/service.py on real processes: small Python programs
started in tmp_path (one that sleeps and notes the signals it gets, one that serves HTTP with a status read from a
file, one that exits with an error), each stopped by the fixture that started it."""

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.lab import service as lab
from ansible_collections.fairgpu.tenancy.plugins.modules import local_service as module
from module_main import run_main

PYTHON = sys.executable

# Notes its pid in the marker file (argv[1]) once its handlers are set, and a line per SIGHUP in <marker>.hup;
# with "ignore-term" among its arguments it ignores SIGTERM.
SLEEPER = """
import os, signal, sys, time
marker = sys.argv[1]
if "ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
def hup(*_):
    with open(marker + ".hup", "a") as handle:
        handle.write("HUP\\n")
signal.signal(signal.SIGHUP, hup)
print("sleeper up", flush=True)
with open(marker + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.rename(marker + ".tmp", marker)
while True:
    time.sleep(1)
"""

# Serves GET on 127.0.0.1:<argv[1]> with the status code written in argv[2], notes SIGHUPs in argv[3]; prints 20
# lines first.
SERVER = """
import http.server, signal, sys
port, status_file, hup_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def hup(*_):
    with open(hup_file, "a") as handle:
        handle.write("HUP\\n")
signal.signal(signal.SIGHUP, hup)
for line in range(20):
    print("server line %d" % line)
sys.stdout.flush()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(status_file) as handle:
            self.send_response(int(handle.read()))
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

# Exits with code 3 after argv[1] seconds, saying why on stderr.
FAILER = """
import sys, time
time.sleep(float(sys.argv[1]))
print("boom: cannot bind 127.0.0.1:1", file=sys.stderr)
sys.exit(3)
"""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(path, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "%s did not appear within %s s" % (path, timeout)
        time.sleep(0.02)


def running(pid):
    return lab.alive(pid)


class Lab(object):
    """Services in tmp_path; every pid they ever ran is killed (and reaped) at the end of the test."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.workdir = str(tmp_path / "work")
        self.pids = set()

    def service(self, name="svc", **options):
        options.setdefault("workdir", self.workdir)
        options.setdefault("ready_interval", 0.05)
        return lab.LocalService(name, **options)

    def run(self, service, state="started", check_mode=False):
        try:
            result = service.run(state, check_mode=check_mode)
        except lab.ServiceError as exc:
            if exc.facts.get("pid"):
                self.pids.add(exc.facts["pid"])
            raise
        if result["pid"]:
            self.pids.add(result["pid"])
        return result

    def marker(self, name="marker"):
        return str(self.tmp_path / name)

    def sleeper(self, marker, *extra):
        return [PYTHON, "-c", SLEEPER, marker] + list(extra)

    def cleanup(self):
        pids = set(self.pids)
        for pidfile in (self.tmp_path).glob("**/*.pid"):
            pids.add(lab.read_pid(str(pidfile)) or 0)
        for pid in pids - {0, os.getpid()}:
            if lab.alive(pid) and lab.is_program(pid, [PYTHON]):
                os.kill(pid, signal.SIGKILL)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


@pytest.fixture
def lab_dir(tmp_path):
    made = Lab(tmp_path)
    yield made
    made.cleanup()


def test_start_writes_pidfile_and_record_and_the_process_runs_detached(lab_dir):
    marker = lab_dir.marker()
    service = lab_dir.service(argv=lab_dir.sleeper(marker), environment={"FAIRGPU_TEST": "1"})
    result = lab_dir.run(service)
    pid = result["pid"]
    assert result["changed"] and result["action"] == "started" and result["reasons"] == ["not running"]
    assert result["log"] == os.path.join(lab_dir.workdir, "svc.log") and result["ready_seconds"] is None
    assert stat.S_IMODE(os.stat(lab_dir.workdir).st_mode) == 0o700
    with open(os.path.join(lab_dir.workdir, "svc.pid")) as handle:
        assert handle.read() == "%d\n" % pid
    with open(os.path.join(lab_dir.workdir, "svc.service.json")) as handle:
        record = json.load(handle)
    assert record == {"argv": lab_dir.sleeper(marker), "environment": {"FAIRGPU_TEST": "1"}, "chdir": lab_dir.workdir,
                      "restart_on": {}, "reload_on": {}, "record": {}}
    wait_for(marker)
    assert running(pid) and os.getsid(pid) != os.getsid(0) and os.getsid(pid) == pid
    # stdin is /dev/null, stdout and stderr the log: nothing of the caller's (Ansible waits for its pipes to close).
    fds = {fd: os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in os.listdir("/proc/%d/fd" % pid)}
    assert fds["0"] == "/dev/null" and fds["1"] == fds["2"] == result["log"]
    assert os.environ.get("FAIRGPU_TEST") is None
    with open("/proc/%d/environ" % pid, "rb") as handle:
        assert b"FAIRGPU_TEST=1" in handle.read().split(b"\0")
    with open(result["log"]) as handle:
        assert handle.read() == "sleeper up\n"

    again = lab_dir.run(service)
    assert again == dict(changed=False, action="none", reasons=[], pid=pid, log=result["log"], ready_seconds=None,
                         diff=None)


def test_a_changed_command_line_restarts_and_the_log_is_appended(lab_dir):
    marker = lab_dir.marker()
    first = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)))
    wait_for(marker)
    os.unlink(marker)
    second = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker, "--verbose")))
    assert second["action"] == "restarted" and second["reasons"] == ["the command line changed"]
    assert second["pid"] != first["pid"] and not running(first["pid"])
    wait_for(marker)
    with open(second["log"]) as handle:
        assert handle.read() == "sleeper up\nsleeper up\n"


def test_a_changed_environment_and_record_restart(lab_dir):
    marker = lab_dir.marker()
    lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), record={"code": "a", "version": 1}))
    result = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), record={"code": "b", "version": 1},
                                         environment={"X": "1"}))
    assert result["action"] == "restarted"
    assert result["reasons"] == ["the environment changed", "record changed: code"]
    assert result["diff"]["before"]["record"] == {"code": "a", "version": 1}
    assert result["diff"]["after"]["record"] == {"code": "b", "version": 1}


def test_a_changed_restart_on_file_restarts(lab_dir):
    marker, config = lab_dir.marker(), lab_dir.tmp_path / "config.yaml"
    config.write_text("a: 1\n")
    first = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config)]))
    assert lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config)]))["action"] == "none"
    config.write_text("a: 2\n")
    second = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config)]))
    assert second["action"] == "restarted" and second["reasons"] == ["restart_on file changed: %s" % config]
    assert second["pid"] != first["pid"] and not running(first["pid"]) and running(second["pid"])


def test_a_missing_restart_on_file_is_an_error_naming_it(lab_dir):
    missing = str(lab_dir.tmp_path / "nowhere.yaml")
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(lab_dir.marker()), restart_on=[missing]))
    assert "restart_on: cannot read %s (No such file or directory)" % missing in str(failed.value)
    assert not os.path.exists(lab_dir.workdir)


def test_a_changed_reload_on_file_sends_the_signal_and_keeps_the_pid(lab_dir):
    marker, config = lab_dir.marker(), lab_dir.tmp_path / "prometheus.yml"
    config.write_text("scrape_interval: 15s\n")
    first = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), reload_on=[str(config)]))
    wait_for(marker)
    config.write_text("scrape_interval: 5s\n")
    second = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), reload_on=[str(config)]))
    assert second["action"] == "reloaded" and second["reasons"] == ["reload_on file changed: %s" % config]
    assert second["pid"] == first["pid"] and running(first["pid"])
    wait_for(marker + ".hup")
    with open(marker + ".hup") as handle:
        assert handle.read() == "HUP\n"
    assert lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), reload_on=[str(config)]))["action"] == "none"
    # A change of a reload_on file together with a restart_on change is a restart.
    other = lab_dir.tmp_path / "other.yml"
    other.write_text("x\n")
    config.write_text("scrape_interval: 1s\n")
    third = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), reload_on=[str(config)], restart_on=[str(other)]))
    assert third["action"] == "restarted" and third["reasons"] == ["restart_on file changed: %s" % other]


def test_state_reloaded_and_restarted(lab_dir):
    marker = lab_dir.marker()
    started = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), reload_signal="USR1"), state="reloaded")
    assert started["action"] == "started" and started["reasons"] == ["not running"]
    restarted = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)), state="restarted")
    assert restarted["action"] == "restarted" and restarted["reasons"] == ["state restarted"]
    assert restarted["pid"] != started["pid"] and not running(started["pid"])


def test_a_stale_pidfile_is_replaced(lab_dir):
    marker = lab_dir.marker()
    os.makedirs(lab_dir.workdir)
    finished = subprocess.Popen([PYTHON, "-c", "pass"])
    finished.wait()
    dead = finished.pid
    with open(os.path.join(lab_dir.workdir, "svc.pid"), "w") as handle:
        handle.write("%d\n" % dead)
    result = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)))
    assert result["action"] == "started" and result["reasons"] == ["not running"] and result["pid"] != dead
    with open(os.path.join(lab_dir.workdir, "svc.pid")) as handle:
        assert int(handle.read()) == result["pid"]


def test_a_pidfile_naming_another_live_program_is_not_the_service(lab_dir):
    """The pidfile names this test's own process (a reused pid): it is not taken for the service, whose program is
    a script started through its #! line; stopping the service leaves this process alone."""
    script = lab_dir.tmp_path / "service.py"
    script.write_text("#!%s\n%s" % (PYTHON, SLEEPER))
    script.chmod(0o755)
    marker = lab_dir.marker()
    os.makedirs(lab_dir.workdir)
    pidfile = os.path.join(lab_dir.workdir, "svc.pid")
    with open(pidfile, "w") as handle:
        handle.write("%d\n" % os.getpid())
    stopped = lab_dir.run(lab_dir.service(argv=[str(script), marker]), state="stopped")
    assert stopped["action"] == "none" and not stopped["changed"] and not os.path.exists(pidfile)
    with open(pidfile, "w") as handle:
        handle.write("%d\n" % os.getpid())
    result = lab_dir.run(lab_dir.service(argv=[str(script), marker]))
    assert result["action"] == "started" and result["pid"] != os.getpid()
    wait_for(marker)
    # The script runs through its interpreter: it is found again by its path among the interpreter's arguments.
    assert lab_dir.run(lab_dir.service(argv=[str(script), marker]))["action"] == "none"


def test_a_process_started_after_the_pidfile_was_written_is_not_the_service(lab_dir):
    """A pid reused after a reboot: the process the pidfile names started after the file was written, so it is not
    the service, even where it runs the same program; it is left alone and the service started."""
    marker = lab_dir.marker()
    begin = time.time()
    first = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)))
    assert begin - 1 <= lab.process_started(first["pid"]) <= time.time() + 1
    pidfile = os.path.join(lab_dir.workdir, "svc.pid")
    assert lab.running_pid(pidfile, [PYTHON]) == (first["pid"], False)
    written = time.time() - 3600
    os.utime(pidfile, (written, written))
    assert lab.running_pid(pidfile, [PYTHON]) == (None, True)
    second = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)))
    assert second["action"] == "started" and second["reasons"] == ["not running"] and second["pid"] != first["pid"]
    assert running(first["pid"]) and running(second["pid"])


def test_a_new_program_finds_the_process_of_the_old_one(lab_dir):
    """Another binary (a new version at another path): the process the record's program runs is restarted, not
    left running beside a new one."""
    old, new = lab_dir.tmp_path / "old.py", lab_dir.tmp_path / "new.py"
    for script in (old, new):
        script.write_text("#!%s\n%s" % (PYTHON, SLEEPER))
        script.chmod(0o755)
    marker = lab_dir.marker()
    first = lab_dir.run(lab_dir.service(argv=[str(old), marker]))
    second = lab_dir.run(lab_dir.service(argv=[str(new), marker]))
    assert second["action"] == "restarted" and second["reasons"] == ["the command line changed"]
    assert not running(first["pid"]) and running(second["pid"])


def test_stopped_honours_term_and_removes_the_pidfile(lab_dir):
    marker = lab_dir.marker()
    started = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker)))
    wait_for(marker)
    begin = time.monotonic()
    result = lab_dir.run(lab_dir.service(), state="stopped")
    assert time.monotonic() - begin < 3
    assert result["changed"] and result["action"] == "stopped" and result["pid"] is None
    assert not running(started["pid"]) and not os.path.exists(os.path.join(lab_dir.workdir, "svc.pid"))
    again = lab_dir.run(lab_dir.service(), state="stopped")
    assert not again["changed"] and again["action"] == "none"
    # A working directory removed after the stop (the lab roles' teardown) is not made again by the next stop.
    shutil.rmtree(lab_dir.workdir)
    gone = lab_dir.run(lab_dir.service(), state="stopped")
    assert not gone["changed"] and not os.path.exists(lab_dir.workdir)


def test_stopped_kills_a_process_that_ignores_term_after_stop_timeout(lab_dir):
    marker = lab_dir.marker()
    started = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker, "ignore-term")))
    wait_for(marker)
    begin = time.monotonic()
    result = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker, "ignore-term"), stop_timeout=1), state="stopped")
    took = time.monotonic() - begin
    assert result["action"] == "stopped" and not running(started["pid"])
    assert 1 <= took < 4, took


def start_server(lab_dir, status, **options):
    port, status_file, hup = free_port(), lab_dir.tmp_path / "status", lab_dir.tmp_path / "server.hup"
    status_file.write_text(str(status))
    url = "http://127.0.0.1:%d/readyz" % port
    service = lab_dir.service("server", argv=[PYTHON, "-c", SERVER, str(port), str(status_file), str(hup)],
                              ready_url=url, **options)
    return service, url, status_file


def test_ready_url_is_waited_for_then_asked_once(lab_dir):
    service, url, status_file = start_server(lab_dir, 200, ready_timeout=20)
    result = lab_dir.run(service)
    assert result["action"] == "started" and 0 <= result["ready_seconds"] < 20
    again = lab_dir.run(service)
    assert again["action"] == "none" and again["ready_seconds"] is not None
    # Nothing changed but the process does not answer 200: one request, and a failure that says so.
    status_file.write_text("503")
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(service)
    message = str(failed.value)
    assert message.startswith("server runs (pid %d) but is not ready: %s answered HTTP 503, not HTTP 200 (one request"
                              % (result["pid"], url)), message
    assert failed.value.facts["changed"] is False and failed.value.facts["pid"] == result["pid"]


def test_ready_timeout_names_the_url_the_seconds_what_was_seen_and_the_log(lab_dir):
    service, url, _status = start_server(lab_dir, 503, ready_timeout=1)
    begin = time.monotonic()
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(service)
    assert time.monotonic() - begin < 6
    message = str(failed.value)
    pid = failed.value.facts["pid"]
    assert message.startswith("server (pid %d) did not become ready within 1 s: %s did not answer HTTP 200; last "
                              "observed: HTTP 503. Log %s/server.log ends with:\n" % (pid, url, lab_dir.workdir)), message
    assert message.endswith("\n".join("server line %d" % line for line in range(5, 20))), message
    assert failed.value.facts["changed"] is True and failed.value.facts["action"] == "started"


def test_ready_timeout_says_the_connection_error(lab_dir):
    marker = lab_dir.marker()
    url = "https://127.0.0.1:%d/ready" % free_port()
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), ready_url=url, ready_timeout=0))
    message = str(failed.value)
    assert "did not become ready within 0 s: %s did not answer HTTP 200; last observed: no answer (" % url in message
    assert "Connection refused" in message, message


def test_a_process_that_dies_during_the_wait_fails_it_at_once(lab_dir):
    url = "http://127.0.0.1:%d/" % free_port()
    begin = time.monotonic()
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(lab_dir.service(argv=[PYTHON, "-c", FAILER, "0.3"], ready_url=url, ready_timeout=30, ready_interval=5))
    assert time.monotonic() - begin < 5
    message = str(failed.value)
    assert "exited with exit code 3 after" in message and "of waiting for %s to answer HTTP 200" % url in message
    assert message.endswith("since this start ends with:\nboom: cannot bind 127.0.0.1:1") or message.endswith(
        "ends with:\nboom: cannot bind 127.0.0.1:1"), message


def test_without_ready_url_a_process_that_dies_at_once_fails(lab_dir):
    with pytest.raises(lab.ServiceError) as failed:
        lab_dir.run(lab_dir.service(argv=[PYTHON, "-c", FAILER, "0"]))
    message = str(failed.value)
    assert "exited with exit code 3 right after its start" in message and message.endswith("boom: cannot bind 127.0.0.1:1")


def test_check_mode_reports_and_does_nothing(lab_dir):
    marker, config = lab_dir.marker(), lab_dir.tmp_path / "config.yaml"
    config.write_text("a: 1\n")
    fresh = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config)]), check_mode=True)
    assert fresh["changed"] and fresh["action"] == "started" and fresh["pid"] is None
    assert fresh["diff"]["before"] == {} and fresh["diff"]["after"]["restart_on"] == {str(config): lab.file_digest(str(config))}
    assert not os.path.exists(lab_dir.workdir)
    started = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config)]))
    record = os.path.join(lab_dir.workdir, "svc.service.json")
    with open(record) as handle:
        before = handle.read()
    check = lab_dir.run(lab_dir.service(argv=lab_dir.sleeper(marker, "-v"), restart_on=[str(config)]), check_mode=True)
    assert check["changed"] and check["action"] == "restarted" and check["reasons"] == ["the command line changed"]
    assert check["diff"]["after"]["argv"][-1] == "-v"
    stop = lab_dir.run(lab_dir.service(), state="stopped", check_mode=True)
    assert stop["changed"] and stop["action"] == "stopped"
    # In check mode a file an earlier task would write may be missing: a warning, and it counts as changed.
    missing = str(lab_dir.tmp_path / "new.yaml")
    service = lab_dir.service(argv=lab_dir.sleeper(marker), restart_on=[str(config), missing])
    assert lab_dir.run(service, check_mode=True)["reasons"] == ["restart_on file changed: %s" % missing]
    assert any(missing in warning for warning in service.warnings)
    assert running(started["pid"])
    with open(os.path.join(lab_dir.workdir, "svc.pid")) as handle:
        assert int(handle.read()) == started["pid"]
    with open(record) as handle:
        assert handle.read() == before


def test_decide_without_a_record_restarts_and_a_reload_keeps_the_rest_of_the_record():
    desired = lab.as_record(["/bin/x"], {}, "/w", {}, {"/c": "2"}, {})
    assert lab.decide("started", 10, None, desired) == ("restarted", [lab.NO_RECORD], desired)
    assert lab.decide("reloaded", 10, None, desired) == ("reloaded", ["state reloaded"], None)
    stored = lab.as_record(["/bin/old"], {}, "/w", {}, {"/c": "1"}, {})
    action, reasons, record = lab.decide("reloaded", 10, stored, desired)
    assert action == "reloaded" and reasons == ["state reloaded", "reload_on file changed: /c"]
    assert record["argv"] == ["/bin/old"] and record["reload_on"] == {"/c": "2"}
    assert lab.decide("stopped", None, stored, None) == ("none", [], None)


# The module's main(), as Ansible calls it.

def test_main_refuses_what_it_cannot_run(lab_dir, capsys):
    workdir = lab_dir.workdir
    result = run_main(module, {"name": "svc", "workdir": workdir}, capsys)
    assert result["failed"] and result["msg"] == "state is started but all of the following are missing: argv"
    result = run_main(module, {"name": "svc", "workdir": workdir, "argv": ["python3", "-c", "pass"]}, capsys)
    assert result["failed"] and result["msg"].startswith("argv: 'python3' is not an absolute path; argv[0] must be "
                                                         "the absolute path of the program")
    result = run_main(module, {"name": "svc", "workdir": workdir, "argv": [str(lab_dir.tmp_path)]}, capsys)
    assert result["failed"] and "is not an executable file" in result["msg"]
    result = run_main(module, {"name": "../svc", "workdir": workdir, "argv": [PYTHON]}, capsys)
    assert result["failed"] and result["msg"].startswith("name: '../svc' cannot name files")
    result = run_main(module, {"name": "svc", "workdir": workdir, "argv": [PYTHON], "ready_url": "ftp://x/"}, capsys)
    assert result["failed"] and "not an http:// or https:// URL" in result["msg"]
    missing = str(lab_dir.tmp_path / "missing.yml")
    result = run_main(module, {"name": "svc", "workdir": workdir, "argv": [PYTHON], "reload_on": [missing]}, capsys)
    assert result["failed"] and "reload_on: cannot read %s" % missing in result["msg"]
    assert result["changed"] is False and result["log"] == os.path.join(workdir, "svc.log")
    result = run_main(module, {"name": "svc", "workdir": workdir, "argv": [PYTHON], "reload_signal": "TERM"}, capsys)
    assert result["failed"] and "reload_signal" in result["msg"]
    assert not os.path.exists(workdir)


def test_main_starts_reports_a_diff_and_stops(lab_dir, capsys):
    marker = lab_dir.marker()
    args = {"name": "svc", "workdir": lab_dir.workdir, "argv": lab_dir.sleeper(marker), "environment": {"PORT": 8080}}
    check = run_main(module, dict(args, _ansible_check_mode=True, _ansible_diff=True), capsys)
    assert check["changed"] and check["action"] == "started" and check["diff"]["after"]["environment"] == {"PORT": "8080"}
    started = run_main(module, args, capsys)
    lab_dir.pids.add(started["pid"])
    assert started["changed"] and started["action"] == "started" and "diff" not in started and running(started["pid"])
    same = run_main(module, dict(args, _ansible_diff=True), capsys)
    assert not same["changed"] and same["action"] == "none" and "diff" not in same
    stopped = run_main(module, {"name": "svc", "workdir": lab_dir.workdir, "state": "stopped"}, capsys)
    assert stopped["changed"] and stopped["action"] == "stopped" and stopped["pid"] is None
    assert not running(started["pid"])
