"""make test's scheduler (tests/lanes.py): one run per machine, and what a run killed outright left behind is
cleared by the next before any test starts (docs/testing.md "Two lanes at once")."""

import fcntl
import importlib.util
import os
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def lanes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("lanes_under_test", os.path.join(ROOT, "tests", "lanes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(module, "MACHINE_LOCK", str(tmp_path / "make-test.lock"))
    # A mark of this test's own: make test's lanes carry the real one, and this test's pytest runs under them.
    monkeypatch.setattr(module, "MARK", "FAIRGPU_MAKE_TEST_UNIT_%s" % uuid.uuid4().hex[:8])
    return module


def test_a_second_run_is_refused_while_the_first_holds_the_machine(lanes, capsys):
    with open(lanes.MACHINE_LOCK, "w") as other:
        other.write("pid 4242, /elsewhere/fairgpu\n")
        other.flush()
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert lanes.hold_the_machine() is None
    err = capsys.readouterr().err
    assert "another make test holds" in err and "pid 4242, /elsewhere/fairgpu" in err
    held = lanes.hold_the_machine()
    assert held is not None
    with open(lanes.MACHINE_LOCK) as handle:
        assert handle.read() == "pid %d, %s\n" % (os.getpid(), lanes.ROOT)
    held.close()


def test_a_process_an_interrupted_run_left_is_stopped_and_named(lanes):
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                            env=dict(os.environ, **{lanes.MARK: "pid 1"}), start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while left.pid not in lanes.marked_processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        said = []
        assert lanes.clear_what_an_interrupted_run_left(said.append) == []
        assert left.wait(timeout=20) is not None
        assert "pids %d" % left.pid in said[0] and "none found" in said[0]
        assert lanes.marked_processes() == {}
    finally:
        if left.poll() is None:
            left.kill()


def test_nothing_is_said_or_stopped_when_nothing_was_left(lanes):
    said = []
    assert lanes.clear_what_an_interrupted_run_left(said.append) == []
    assert said == []


def test_the_clusters_are_read_from_kwokctls_command_lines(lanes):
    etcd = ("/root/.local/share/fairgpu/kwok/clusters/fairgpu-it/bin/etcd --name=node0 "
            "--data-dir=/root/.local/share/fairgpu/kwok/clusters/fairgpu-it/etcd")
    kueue = "/root/.cache/fairgpu/kueue-v0.19.2/bin/kueue --config=/root/.local/share/fairgpu/kueue/fairgpu-it/config.yaml"
    found = set(m.groups() for cmdline in (etcd, kueue) for m in lanes.CLUSTER_DIR.finditer(cmdline))
    assert found == {("/root/.local/share/fairgpu", "fairgpu-it")}


def test_a_failed_targets_summary_is_picked_from_its_log(lanes, tmp_path):
    log = tmp_path / "integration-shared.log"
    log.write_text("tests/integration/test_10_cluster.py::test_a PASSED\n"
                   "=========================== short test summary info ============================\n"
                   "FAILED tests/integration/test_45_faults.py::test_killed - AssertionError: 3 Jobs lost\n"
                   "ERROR tests/integration/test_60_isolation.py::test_b - TimeoutError\n"
                   "============ 1 failed, 80 passed, 1 error in 2900.00s (0:48:20) ============\n"
                   "make: *** [Makefile:124: integration-shared] Error 1\n")
    assert lanes.why_it_failed(str(log)) == [
        "FAILED tests/integration/test_45_faults.py::test_killed - AssertionError: 3 Jobs lost",
        "ERROR tests/integration/test_60_isolation.py::test_b - TimeoutError"]


def test_a_log_without_a_summary_gives_its_last_lines(lanes, tmp_path):
    log = tmp_path / "lint.log"
    log.write_text("".join("line %d\n" % n for n in range(100)))
    assert lanes.why_it_failed(str(log), most=3) == ["line 97", "line 98", "line 99"]
    assert lanes.why_it_failed(str(tmp_path / "absent.log"))[0].startswith("(no log: ")
