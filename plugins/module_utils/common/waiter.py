# -*- coding: utf-8 -*-
# Copyright: fairgpu maintainers
# Apache License 2.0 (see LICENSE)
"""One way to wait for the cluster: read, judge the read, sleep, until the judgement holds or the time is up.

In the style of kubernetes.core's ``plugins/module_utils/k8s/waiter.py``: a ``ticks`` generator that sleeps
between reads and stops at the deadline, and ``Waiter.wait`` returning whether the predicate held, the last read
and the seconds it took. It differs where fairgpu needs it to: the read is any callable (several lists, a Kueue
summary), not a get of one resource; every read can be observed (a timeline sample); and the clock, the sleep and
the wall clock are passed in, so callers are unit-tested without a cluster or real time. It never fails a module
itself: the caller words the failure and adds what it last saw.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


def ticks(start, timeout, interval, monotonic, sleep):
    """Yield once at once, then once after each ``interval`` seconds of sleep, while fewer than ``timeout`` seconds
    have passed since ``start`` (a ``monotonic()`` reading). The last tick may come at or just after the deadline,
    so a wait of 0 seconds still reads once."""
    yield
    while monotonic() - start < timeout:
        sleep(interval)
        yield


class Waiter(object):
    """Waits on a clock: ``monotonic`` (seconds, for deadlines and durations), ``sleep`` and ``wall`` (Unix time,
    for timestamps); each defaults to the ``time`` module's."""

    def __init__(self, monotonic=None, sleep=None, wall=None):
        self.monotonic = monotonic or time.monotonic
        self.sleep = sleep or time.sleep
        self.wall = wall or time.time

    def wait(self, read, timeout, interval, predicate=bool, observe=None):
        """Call ``read()`` until ``predicate(value)`` holds or ``timeout`` seconds have passed, sleeping ``interval``
        seconds between reads. ``observe(value, elapsed)``, if given, sees every read with the seconds from the
        start of the wait to the end of that read.

        Returns ``(held, value, elapsed)``: whether the predicate held, the last value read and the seconds from
        the start to the end of the last read."""
        start = self.monotonic()
        held, value, elapsed = False, None, 0.0
        for _tick in ticks(start, timeout, interval, self.monotonic, self.sleep):
            value = read()
            elapsed = self.monotonic() - start
            if observe is not None:
                observe(value, elapsed)
            held = bool(predicate(value))
            if held:
                break
        return held, value, elapsed

    def pause(self, seconds):
        """Let ``seconds`` pass (a hold, not a wait for anything)."""
        self.sleep(seconds)
