# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""The dashboard page in a headless browser: its address over a time window, and Chromium's command line that saves
a screenshot of it. Pure logic.

The page (files/lab/dashboard_page, served by files/lab/dashboard_server.py) renders fairgpu's Perses dashboard with
Perses's ``ViewDashboard``, whose time range and refresh come from the address (``@perses-dev/plugin-system``
``TimeRangeProviderWithQueryParams``: ``start`` and ``end`` in Unix milliseconds or a duration such as ``1h``,
``refresh`` a duration, ``0s`` for none).

Chromium runs headless with a fresh profile and no background traffic (the flags Debian's chromium needs on a
machine without outside network: background networking, component updates, sync and QUIC off), and every host
name and address but ``localhost`` and ``127.0.0.1`` resolved to nothing (``--host-resolver-rules``), so the page
reaches this machine's loopback only.
``--virtual-time-budget`` lets the page run (fetch, render) for that many milliseconds of virtual time, which
Chromium does not advance while a request is in flight, before the screenshot is taken.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from urllib.parse import urlencode

# Wide enough for the grid's 24 columns, tall enough for its rows (10 panels down to row 48 of about 40 px, and the
# header with the variables and the time range).
WINDOW = (1600, 2150)
VIRTUAL_TIME_BUDGET_MS = 20000
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"]


def window_url(base, start, end):
    """The page at ``base`` showing ``start`` to ``end`` (Unix seconds), not refreshing."""
    query = urlencode([("start", int(start * 1000)), ("end", int(end * 1000)), ("refresh", "0s")])
    return "%s?%s" % (base.rstrip("/") + "/", query)


def screenshot_argv(browser, url, path, profile_dir, window=WINDOW, budget_ms=VIRTUAL_TIME_BUDGET_MS):
    """Chromium's command line that loads ``url`` and writes a PNG screenshot of ``window`` (width, height in
    pixels) to ``path``, with a new profile in ``profile_dir``."""
    return [browser] + CHROMIUM_FLAGS + [
        "--user-data-dir=%s" % profile_dir, "--window-size=%d,%d" % window,
        "--virtual-time-budget=%d" % budget_ms, "--screenshot=%s" % path, url]
