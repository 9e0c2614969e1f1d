"""The pure helpers of bench/task_cost.py, bench/flame_summary.py and bench/bare_task.py."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

from bench.bare_task import signature_ok
from bench.flame_summary import package_of, summarise
from bench.task_cost import Wave, parse_stat, platform_ms, tree_ms

ROOT = Path("/repo")


def test_parse_stat_reads_ppid_and_both_tick_pairs_past_a_name_with_spaces() -> None:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime ...
    text = "42 (a (b) c) S 7 42 42 0 -1 0 0 0 0 0 100 20 5 3 20 0 1 0"
    assert parse_stat(text) == (7, 120, 8)


def test_tree_ms_adds_live_descendants_only() -> None:
    import os

    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    procs = {10: (1, 5), 11: (10, 3), 12: (11, 2), 20: (1, 100)}
    assert tree_ms(10, procs) == 10 * tick_ms
    assert tree_ms(99, procs) == 0


def test_package_of_site_packages_project_and_stdlib_frames() -> None:
    site = "/x/.venv/lib/python3.11/site-packages"
    assert package_of(f"execute ({site}/sqlalchemy/engine/base.py:12)", ROOT) == "sqlalchemy"
    assert package_of(f"f ({site}/six.py:1)", ROOT) == "six"
    assert package_of("route (/repo/standin/router.py:3)", ROOT) == "standin"
    assert package_of("dumps (/usr/lib/python3.11/json/__init__.py:9)", ROOT) == "json"
    assert package_of("run (/usr/lib/python3.11/threading.py:9)", ROOT) == "threading"
    assert package_of("<module> (<string>:3)", ROOT) == "<other>"


def test_summarise_counts_self_by_leaf_and_inclusive_once_per_stack() -> None:
    lines = [
        "run (/repo/activities/a.py:1);route (/repo/standin/r.py:2);"
        "dumps (/usr/lib/python3.11/json/e.py:3) 6\n",
        "run (/repo/activities/a.py:1);route (/repo/standin/r.py:2);"
        "route (/repo/standin/r.py:9) 2\n",
        "run (/repo/activities/a.py:1) 2\n",
        "garbage\n",
    ]
    s = summarise(lines, ROOT)
    assert s.samples == 10
    assert s.own == {"json": 6, "standin": 2, "activities": 2}
    assert s.inclusive["standin"] == 8 and s.share("standin") == 0.8
    assert s.inclusive["activities"] == 10


def test_platform_ms_leaves_out_the_model_and_other_parts() -> None:
    w = Wave("w", 4, 2, 1.0, {"api": 100.0, "worker": 300.0, "sim": 50.0}, {"worker": 40.0})
    assert platform_ms(w, ("api", "worker")) == (400 - 40) / 2
    assert w.per_task("sim") == 25


def test_signature_ok_checks_mac_and_freshness() -> None:
    body, secret = b'{"status": "succeeded"}', "s3cret"
    t = int(time.time())
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert signature_ok(secret, body, f"t={t},v1={mac}")
    assert not signature_ok("other", body, f"t={t},v1={mac}")
    assert not signature_ok(secret, body + b" ", f"t={t},v1={mac}")
    old = t - 1000
    stale = hmac.new(secret.encode(), f"{old}.".encode() + body, hashlib.sha256).hexdigest()
    assert not signature_ok(secret, body, f"t={old},v1={stale}")
    assert not signature_ok(secret, body, "")


def test_waits_and_the_native_loop_are_left_out_of_the_shares(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("item = tx.get()\nloop.run_until_complete(main)\nx = 1\n")
    wait, loop, code = (f"f ({src}:{n})" for n in (1, 2, 3))
    s = summarise([f"{wait} 6\n", f"{loop} 3\n", f"{code} 2\n"], tmp_path)
    assert (s.waiting, s.loop, s.samples) == (6, 3, 2)
    assert s.own == {"m": 2}
