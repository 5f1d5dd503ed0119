# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The embedded cluster's dashboard page server: fairgpu's Perses dashboard, live, on a loopback port.

It serves the page built from files/lab/dashboard_page (files/lab/dashboard_page/build.sh: index.html, scripts,
styles and fonts, nothing from a CDN) and, beside it, two files the page reads when it loads:

- ``/dashboard.json``: the Perses dashboard file (files/monitoring/fairgpu-dashboard.perses.json), as given;
- ``/config.json``: ``{"prometheus": URL}``, where the browser sends the panels' queries.

The browser queries Prometheus itself (Prometheus's ``--web.cors.origin`` allows this page's origin only); this
server never dials anything. Both addresses must be on 127.0.0.0/8: the embedded cluster talks to nothing else.

    dashboard_server.py --page DIR --dashboard FILE --prometheus URL [--host 127.0.0.1] [--port 19091]

The lab_monitoring role starts it (module local_service).
"""

import argparse
import functools
import ipaddress
import json
import logging
import signal
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

LOG = logging.getLogger("dashboard-page")


def loopback(host):
    """Whether ``host`` (an address or ``localhost``) is on 127.0.0.0/8."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network("127.0.0.0/8")
    except ValueError:
        return False


class PageHandler(SimpleHTTPRequestHandler):
    """Static files of the page, plus /config.json and /dashboard.json from memory; no directory listings."""

    def __init__(self, *args, files=None, **kwargs):
        self.files = files
        super().__init__(*args, **kwargs)

    def do_GET(self):
        path = urlsplit(self.path).path
        if path in self.files:
            body = self.files[path]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def list_directory(self, path):
        self.send_error(404)

    def log_message(self, format, *args):
        LOG.info("%s %s", self.address_string(), format % args)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--page", required=True, help="the built page (build.sh's dist directory)")
    parser.add_argument("--dashboard", required=True, help="the Perses dashboard file")
    parser.add_argument("--prometheus", required=True, help="Prometheus's URL, as the browser reaches it")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=19091)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if not loopback(args.host):
        parser.error("--host %s: the embedded cluster's page listens on 127.0.0.0/8 only" % args.host)
    if not loopback(urlsplit(args.prometheus).hostname or ""):
        parser.error("--prometheus %s: the embedded cluster's Prometheus is on 127.0.0.0/8 only" % args.prometheus)
    with open(args.dashboard, "rb") as handle:
        dashboard = handle.read()
    json.loads(dashboard)
    files = {"/dashboard.json": dashboard,
             "/config.json": json.dumps({"prometheus": args.prometheus.rstrip("/")}).encode()}
    handler = functools.partial(PageHandler, directory=args.page, files=files)
    server = ThreadingHTTPServer((args.host, args.port), handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    LOG.info("dashboard page on http://%s:%d/ (Prometheus %s)", args.host, args.port, args.prometheus)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
