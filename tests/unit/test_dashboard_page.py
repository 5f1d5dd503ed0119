"""The dashboard page's server (files/lab/dashboard_server.py) and the headless browser's command line
(module_utils/monitoring/page.py): loopback only, the two files the page reads, no directory listings, and a
screenshot of a fixed window that reaches no host but the loopback."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring import page

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SERVER = os.path.join(ROOT, "files", "lab", "dashboard_server.py")


def test_window_url_is_perses_time_range_in_milliseconds_without_refresh():
    assert page.window_url("http://127.0.0.1:19091", 1700000000.25, 1700000600) == (
        "http://127.0.0.1:19091/?start=1700000000250&end=1700000600000&refresh=0s")
    assert page.window_url("http://127.0.0.1:19091/", 1, 2).startswith("http://127.0.0.1:19091/?start=1000&")


def test_screenshot_argv_resolves_no_host_but_the_loopback():
    argv = page.screenshot_argv("/usr/bin/chromium", "http://127.0.0.1:1/?start=1", "/r/flood-dashboard.png", "/tmp/p")
    assert argv[0] == "/usr/bin/chromium" and argv[-1] == "http://127.0.0.1:1/?start=1"
    for flag in ("--headless", "--disable-background-networking", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
                 "--user-data-dir=/tmp/p", "--screenshot=/r/flood-dashboard.png", "--window-size=1600,2150"):
        assert flag in argv


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.headers.get("Content-Type"), response.read()


@pytest.fixture
def server(tmp_path):
    built = tmp_path / "dist"
    (built / "static").mkdir(parents=True)
    (built / "index.html").write_text("<!doctype html><div id=root></div>")
    (built / "static" / "index.js").write_text("1")
    board = tmp_path / "board.json"
    board.write_text('{"kind": "Dashboard"}')
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "--page", str(built), "--dashboard", str(board),
                             "--prometheus", "http://127.0.0.1:19090/", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    deadline = time.time() + 20
    while True:
        try:
            get(url + "/")
            break
        except (urllib.error.URLError, ConnectionError):
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() is not None else "no answer"
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_the_server_gives_the_page_and_the_two_files_it_reads(server):
    assert get(server + "/")[2].startswith(b"<!doctype html>")
    assert get(server + "/static/index.js")[2] == b"1"
    status, kind, body = get(server + "/config.json")
    assert (status, kind, json.loads(body)) == (200, "application/json", {"prometheus": "http://127.0.0.1:19090"})
    assert json.loads(get(server + "/dashboard.json?x=1")[2]) == {"kind": "Dashboard"}
    with pytest.raises(urllib.error.HTTPError) as listing:
        get(server + "/static/")
    assert listing.value.code == 404


@pytest.mark.parametrize("args, field", [(["--host", "0.0.0.0"], "--host 0.0.0.0"),
                                         (["--prometheus", "http://prometheus.example:9090"], "--prometheus")])
def test_the_server_refuses_addresses_off_the_loopback(tmp_path, args, field):
    board = tmp_path / "board.json"
    board.write_text("{}")
    argv = [sys.executable, SERVER, "--page", str(tmp_path), "--dashboard", str(board),
            "--prometheus", "http://127.0.0.1:19090", "--port", str(free_port())] + args
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and field in done.stderr and "127.0.0.0/8" in done.stderr
