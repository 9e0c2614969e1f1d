"""The supervisor's state machine on real child processes, with the clock passed in: a
crash loop backs off (doubling to the cap), a child that ran long enough starts over from
the initial delay, and a restart replaces the pid."""

from __future__ import annotations

import subprocess
import sys

from cli.supervise import Backoff, Supervisor


def _crash() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _until_exited(sup: Supervisor, name: str) -> None:
    sup.children[name].proc.wait(timeout=30)


def test_backoff_doubles_to_the_cap() -> None:
    b = Backoff(initial=0.5, maximum=30.0, reset_after=60.0)
    assert [b.delay(n) for n in range(1, 10)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]


def test_a_crash_loop_backs_off_and_is_reported() -> None:
    changes: list[int] = []
    sup = Supervisor(Backoff(0.5, 4.0, 60.0), on_change=lambda: changes.append(1))
    sup.add("worker", _crash, _crash())
    now = 0.0
    for _ in range(6):
        _until_exited(sup, "worker")
        sup.tick(now)  # notices the exit: backoff, not an immediate restart
        c = sup.children["worker"]
        assert c.state == "backoff" and c.last_exit == 3
        sup.tick(now + c.backoff_seconds / 2)  # not yet
        assert c.state == "backoff"
        now += c.backoff_seconds
        sup.tick(now)  # due: started again
        assert c.state == "running"
    c = sup.children["worker"]
    assert c.delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert c.restarts == 6 and c.failures_in_a_row == 6
    assert sup.view()["worker"]["restarts"] == 6 and len(changes) == 12
    c.proc.wait(timeout=30)


def test_a_healthy_run_resets_the_backoff_and_a_restart_gets_a_new_pid() -> None:
    sup = Supervisor(Backoff(0.5, 30.0, 60.0), on_change=lambda: None)
    sup.add("api", _crash, _crash())
    for now in (0.0, 0.5, 1.0, 2.0):  # two quick failures: 0.5 s, then 1 s
        if sup.children["api"].state == "running":
            _until_exited(sup, "api")
        sup.tick(now)
    c = sup.children["api"]
    assert c.delays == [0.5, 1.0] and c.state == "running"
    c.spawn = _sleeper
    c.proc.wait(timeout=30)
    sup.tick(100.0)  # it had "run" 98 s before this exit: the count starts over
    assert c.delays[-1] == 0.5 and c.failures_in_a_row == 1
    old = c.proc.pid
    sup.tick(100.5)
    assert c.state == "running" and c.proc.pid != old and c.proc.poll() is None
    sup.stop(timeout=10)
    assert c.proc.poll() is not None
