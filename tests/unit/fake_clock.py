"""A clock for unit tests of waiting code (``common/waiter.py`` and its callers): time moves only when something
sleeps, so a test knows every moment a read happens."""


class FakeClock(object):
    """``monotonic``, ``time`` (wall clock) and ``sleep``; ``slept`` lists every sleep. ``on_sleep(now)``, if set,
    runs after each sleep (the world changing while the caller waits)."""

    def __init__(self, start=1000.0):
        self.now, self.slept, self.on_sleep = start, [], None

    def monotonic(self):
        return self.now

    def time(self):
        return 1.7e9 + self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(self.now)
