"""The shared waiter (plugins/module_utils/common/waiter.py), on a fake clock."""

from ansible_collections.fairgpu.tenancy.plugins.module_utils.common.waiter import Waiter

from fake_clock import FakeClock


def waiter(clock):
    return Waiter(monotonic=clock.monotonic, sleep=clock.sleep, wall=clock.time)


def test_returns_at_the_first_read_that_holds_with_the_value_and_the_time():
    clock = FakeClock()
    reads = iter([None, 0, "", 3, 4])
    held, value, elapsed = waiter(clock).wait(lambda: next(reads), timeout=10, interval=0.5)
    assert (held, value, elapsed) == (True, 3, 1.5)
    assert clock.slept == [0.5, 0.5, 0.5]


def test_stops_at_the_deadline_with_the_last_read():
    clock = FakeClock()
    seen = []
    held, value, elapsed = waiter(clock).wait(lambda: clock.now, timeout=2, interval=1, predicate=lambda v: v > 2000,
                                              observe=lambda value, seconds: seen.append(seconds))
    # Reads at 0, 1 and 2 s: the read at the deadline still counts, then it stops without sleeping again.
    assert (held, value, elapsed) == (False, 1002.0, 2.0)
    assert seen == [0.0, 1.0, 2.0] and clock.slept == [1, 1]


def test_a_zero_timeout_reads_once():
    clock = FakeClock()
    assert waiter(clock).wait(lambda: None, timeout=0, interval=1) == (False, None, 0.0)
    assert clock.slept == []


def test_the_world_may_change_while_it_sleeps():
    clock = FakeClock()
    state = {"admitted": 0}
    clock.on_sleep = lambda now: state.update(admitted=state["admitted"] + 2)
    held, value, _elapsed = waiter(clock).wait(lambda: dict(state), timeout=60, interval=1,
                                               predicate=lambda s: s["admitted"] >= 8)
    assert held and value == {"admitted": 8} and len(clock.slept) == 4


def test_elapsed_counts_the_read_itself():
    clock = FakeClock()

    def slow_read():
        clock.now += 0.25  # a read that takes a quarter of a second
        return True
    assert waiter(clock).wait(slow_read, timeout=5, interval=1) == (True, True, 0.25)


def test_pause_sleeps_on_the_given_clock():
    clock = FakeClock()
    waiter(clock).pause(5)
    assert clock.slept == [5] and clock.now == 1005.0
