"""What one task costs in CPU, per process, next to a bare Temporal workflow.

    .venv/bin/python bench/task_cost.py [--people 40] [--series 5] [--sim-speed 1.0] [--no-profile]

1. `lomo up` on a fresh embedded stack (SQLite, its own data dir and ports): the dev
   server, the simulator, the memory service, one worker and one api. After one warm-up
   picture (the worker's first task loads the stand-in model and the embedder):
   - *pictures*: N people each send one picture request at once;
   - *series*: a smaller number of people each run one turn of a poster series: the plan,
     the price card confirmed through the api, the drafts, the select card answered
     through the api, the finals.
   Each wave's CPU is read from /proc/<pid>/stat (utime+stime, with the children's, of each
   process and its live descendants) before and after, and divided by the tasks finished.
   Completion is read from the SQLite file directly, so polling costs no api CPU.
2. The bare side (bench/bare_task.py) on its own dev server, simulator, front and worker,
   after its own warm-up task: the same N pictures, measured the same way.

With profiling (the default; needs `.venv/bin/py-spy`), py-spy samples the worker and the
api during each Lomo wave (`--nonblocking`: the processes are never paused) and writes
the collapsed stacks under `bench/out/`. The stand-in model's CPU is the worker's CPU
times the share of its samples with a frame under `standin/` on the stack. A real
deployment runs the model remotely, so the `lomo` figure leaves it out, and the
simulator's own CPU too (both are printed on their own lines).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.crowd import add_people, free_port, wait_stack
from bench.flame_summary import MODEL, Summary, summarise, table

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PY_SPY = Path(sys.executable).parent / "py-spy"
INSTRUMENT = ROOT / "bench" / "model_cpu"  # its sitecustomize.py counts the model's CPU
SUBJECTS = [
    "red tabby cat",
    "blue whale at dusk",
    "green tree frog",
    "yellow paper kite",
    "purple owl in snow",
    "grey cat on a windowsill",
    "orange fox in a meadow",
    "white lighthouse in a storm",
]
# The simulator's latency factor: 1.0 is a picture in about two seconds. At 0.2 (as
# bench/crowd.py) a burst on a loaded machine commits many orders' job ids after their
# callbacks came, and those tasks take the 60 s fallback poll instead of the callback.
SIM_SPEED = 1.0
SECRET = "bench-callback-secret-0123456789"
T = TypeVar("T")


def machine() -> str:
    """Where a figure was measured: cores and the load other processes put on them."""
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.1f} (1 min), {five:.1f} (5 min)"


def picture_text(i: int) -> str:
    return f"Generate an image of a {SUBJECTS[i % len(SUBJECTS)]}, version {i}"


# --- CPU of processes ------------------------------------------------------------------


def parse_stat(text: str) -> tuple[int, int, int]:
    """(ppid, own ticks, reaped children's ticks) from the text of /proc/<pid>/stat."""
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, ticks of it and its reaped children) for every process now."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                ppid, own, reaped = parse_stat(Path(entry.path, "stat").read_text())
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            out[int(entry.name)] = (ppid, own + reaped)
    return out


def tree_ms(root: int, procs: dict[int, tuple[int, int]]) -> float:
    """CPU ms of `root` and all its live descendants (a service that forks is counted whole;
    its exited children are in the reaped ticks of their parent)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += procs.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, []))
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms(pids: dict[str, int]) -> dict[str, float]:
    procs = process_table()
    return {name: tree_ms(pid, procs) for name, pid in pids.items()}


def model_cpu_ms(folder: Path | None, pids: dict[str, int]) -> dict[str, float]:
    """The stand-in model's CPU ms so far per process, as bench/model_cpu/sitecustomize.py
    keeps it (0 for a process that never called the model)."""
    out = {}
    for name, pid in pids.items():
        path = folder / str(pid) if folder else None
        text = path.read_text().strip() if path and path.exists() else ""
        out[name] = float(text) * 1000 if text else 0.0
    return out


# --- waiting and profiling ---------------------------------------------------------------


async def until(check: Callable[[], T | None], within: float, what: str) -> T:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (got := check()) is not None:
            return got
        await asyncio.sleep(0.3)
    raise TimeoutError(f"{what} did not happen within {within:.0f} s")


def read_db(path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    # Read-only, a connection per poll: the bench never holds a lock the stack waits on.
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as db:
        return db.execute(sql, args).fetchall()


class Profiles:
    """py-spy on some processes while a wave runs; the collapsed stacks under `out`."""

    def __init__(self, enabled: bool, out: Path) -> None:
        self.enabled, self.out = enabled, out
        self.running: list[subprocess.Popen[bytes]] = []
        self.files: dict[str, Path] = {}

    def start(self, wave: str, pids: dict[str, int]) -> None:
        if not self.enabled:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            path = self.out / f"{name}-{wave}.txt"
            cmd = [str(PY_SPY), "record", "--pid", str(pid), "--rate", "100", "--format"]
            cmd += ["raw", "--full-filenames", "--nonblocking", "--output", str(path)]
            log = (self.out / f"{name}-{wave}.log").open("wb")
            self.running.append(subprocess.Popen(cmd, stdout=log, stderr=log))
            self.files[f"{name}-{wave}"] = path

    def stop(self) -> None:
        for p in self.running:
            p.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for p in self.running:
            p.wait(timeout=60)
        self.running = []

    def summary(self, key: str) -> Summary | None:
        path = self.files.get(key)
        if path is None or not path.exists():
            return None
        with path.open() as f:
            return summarise(f)


@dataclass
class Wave:
    name: str
    tasks: int
    finished: int
    seconds: float
    cpu: dict[str, float]  # ms over the whole wave, per process
    model: dict[str, float] = field(default_factory=dict)  # of which in the stand-in model
    events: int | None = None  # history events the wave added, over all workflows
    notes: list[str] = field(default_factory=list)

    def per_task(self, name: str) -> float:
        return self.cpu[name] / self.finished if self.finished else float("nan")


async def measured(
    name: str,
    pids: dict[str, int],
    tasks: int,
    run: Callable[[], Awaitable[int]],
    profiles: Profiles | None = None,
    profiled: tuple[str, ...] = (),
    model_dir: Path | None = None,
    temporal: str | None = None,
) -> Wave:
    """CPU per process around `run` (which returns how many tasks finished); the history
    events are counted outside the CPU window, since asking costs the server CPU."""
    e0 = await history_events(temporal) if temporal else None
    if profiles:
        profiles.start(name, {p: pids[p] for p in profiled})
    before, t0, m0 = cpu_ms(pids), time.monotonic(), model_cpu_ms(model_dir, pids)
    try:
        finished = await run()
    finally:
        after, seconds, m1 = cpu_ms(pids), time.monotonic() - t0, model_cpu_ms(model_dir, pids)
        if profiles:
            profiles.stop()
    cpu = {k: after[k] - before[k] for k in before}
    model = {k: m1[k] - m0[k] for k in m0 if m1[k] > m0[k]} if model_dir else {}
    events = await history_events(temporal) - e0 if temporal and e0 is not None else None
    return Wave(name, tasks, finished, seconds, cpu, model, events)


async def history_events(address: str) -> int:
    """The history length of every workflow on the server, added up."""
    from temporalio.client import Client

    client = await Client.connect(address)
    total = 0
    async for wf in client.list_workflows():
        total += (
            await client.get_workflow_handle(wf.id, run_id=wf.run_id).describe()
        ).history_length
    return total


# --- the Lomo side -------------------------------------------------------------------------


def start_lomo(tmp: Path, model_dir: Path, sim_speed: float) -> subprocess.Popen[bytes]:
    """`lomo up` with one worker and one api on the embedded default (SQLite in `tmp`),
    each Python part keeping its stand-in model CPU in `model_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMO_")}
    path = os.pathsep.join(filter(None, [str(INSTRUMENT), env.get("PYTHONPATH")]))
    env.update(
        PYTHONPATH=path,
        BENCH_MODEL_CPU_DIR=str(model_dir),
        LOMO_DATA_DIR=str(tmp),
        LOMO_API_PORT=str(free_port()),
        LOMO_SIM_PORT=str(free_port()),
        LOMO_TEMPORAL_PORT=str(free_port()),
        LOMO_TEMPORAL_UI_PORT=str(free_port()),
        LOMO_MEMORY_PORT=str(free_port()),
        LOMO_WORKER_METRICS_PORT="0",
        LOMO_SIM_SPEED=str(sim_speed),
        LOMO_OFFLINE_STREAM_CHARS_PER_SECOND="0",  # the stand-in answers at once
        LOMO_RATE_LIMIT_PER_MINUTE="100000",
    )
    out = (tmp / "up.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up"],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )


async def post_message(http: httpx.AsyncClient, url: str, token: str, text: str) -> str:
    r = await http.post(
        f"{url}/v1/messages", json={"text": text}, headers={"Authorization": f"Bearer {token}"}
    )
    r.raise_for_status()
    return str(r.json()["message_id"])


def _finished(db: Path, ids: list[str]) -> int | None:
    """How many of the messages' tasks are completed, once none is still running."""
    marks = ",".join("?" * len(ids))
    rows = read_db(
        db,
        f"SELECT t.status FROM messages m LEFT JOIN tasks t ON t.id = m.task_id"
        f" WHERE m.id IN ({marks})",
        tuple(ids),
    )
    ended = [s for (s,) in rows if s in ("completed", "failed", "cancelled")]
    return sum(s == "completed" for s in ended) if len(ended) == len(ids) else None


def task_times(db: Path, kind: str, n: int) -> str:
    """The last `n` tasks of `kind`: seconds from created to their last update, p50 and
    max. A task that missed its generation callback shows the fallback poll's minute."""
    rows = read_db(
        db,
        "SELECT created_at, updated_at FROM tasks WHERE kind = ? ORDER BY created_at DESC LIMIT ?",
        (kind, n),
    )
    took = sorted(
        (datetime.fromisoformat(u) - datetime.fromisoformat(c)).total_seconds() for c, u in rows
    )
    if not took:
        return "no task times"
    return f"task time p50 {took[len(took) // 2]:.1f} s, max {took[-1]:.1f} s ({len(took)} tasks)"


async def lomo_pictures(
    http: httpx.AsyncClient, url: str, db: Path, tokens: list[str], within: float
) -> int:
    ids = await asyncio.gather(
        *(post_message(http, url, t, picture_text(i)) for i, t in enumerate(tokens))
    )
    return await until(lambda: _finished(db, list(ids)), within, "the pictures")


def _task_of(db: Path, mid: str) -> str | None:
    rows = read_db(db, "SELECT task_id FROM messages WHERE id = ?", (mid,))
    return rows[0][0] if rows and rows[0][0] else None


def _open_card(db: Path, tid: str, kind: str) -> tuple[str, list[Any]] | None:
    """The task's open card of `kind` (id, options) once the task waits for the person."""
    rows = read_db(
        db,
        "SELECT c.id, c.options FROM cards c JOIN tasks t ON t.id = c.task_id"
        " WHERE c.task_id = ? AND c.kind = ? AND c.status = 'open'"
        " AND t.status = 'waiting_user'",
        (tid, kind),
    )
    return (rows[0][0], json.loads(rows[0][1] or "[]")) if rows else None


def _status(db: Path, tid: str) -> str | None:
    rows = read_db(db, "SELECT status FROM tasks WHERE id = ?", (tid,))
    ended = rows and rows[0][0] in ("completed", "failed", "cancelled")
    return rows[0][0] if ended else None


async def one_series(
    http: httpx.AsyncClient, url: str, db: Path, token: str, within: float
) -> bool:
    """One turn of a poster series, answered as the person's app would; True if completed."""
    auth = {"Authorization": f"Bearer {token}"}
    mid = await post_message(http, url, token, "Make me a series of retro-style brand posters")
    tid = await until(lambda: _task_of(db, mid), within, "routing")
    price, _ = await until(lambda: _open_card(db, tid, "price"), within, "the price card")
    r = await http.post(f"{url}/v1/cards/{price}/actions", json={"action": "confirm"}, headers=auth)
    r.raise_for_status()
    pick, options = await until(lambda: _open_card(db, tid, "select"), within, "the drafts")
    r = await http.post(
        f"{url}/v1/cards/{pick}/actions",
        json={"action": "select", "option_id": options[min(1, len(options) - 1)]["id"]},
        headers=auth,
    )
    r.raise_for_status()
    return await until(lambda: _status(db, tid), within, "the finals") == "completed"


async def lomo_series(
    http: httpx.AsyncClient, url: str, db: Path, tokens: list[str], within: float
) -> int:
    done = await asyncio.gather(*(one_series(http, url, db, t, within) for t in tokens))
    return sum(done)


async def run_lomo(
    tmp: Path, people: int, series: int, profiles: Profiles, within: float, sim_speed: float
) -> list[Wave]:
    model_dir = tmp / "model_cpu"
    model_dir.mkdir()
    proc = start_lomo(tmp, model_dir, sim_speed)
    try:
        stack = await wait_stack(tmp, proc, 1)
        pids = {n: stack["pids"][n] for n in ("temporal", "api", "worker", "memory", "sim")}
        url, db, address = stack["api_url"], tmp / "lomo.db", stack["temporal_address"]
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(timeout=120, limits=limits) as http:
            tokens = await add_people(http, stack, 1 + people + series)
            warm = await lomo_pictures(http, url, db, tokens[:1], within)
            print(f"  lomo warm-up: {warm} picture", flush=True)
            crowd, posters = tokens[1 : 1 + people], tokens[1 + people :]
            waves = []
            for name, n, run in (
                ("pictures", people, lambda: lomo_pictures(http, url, db, crowd, within)),
                ("series", series, lambda: lomo_series(http, url, db, posters, within)),
            ):
                if n:
                    w = await measured(
                        name, pids, n, run, profiles, ("worker", "api"), model_dir, address
                    )
                    kind = "lightweight" if name == "pictures" else "persistent"
                    w.notes.append(task_times(db, kind, n))
                    print(f"  lomo {name}: {w.finished} in {w.seconds:.0f} s", flush=True)
                    waves.append(w)
        return waves
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


# --- the bare side -------------------------------------------------------------------------


def _spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=out)


def _wait_http(url: str, proc: subprocess.Popen[bytes], within: float = 60) -> None:
    """Until something answers at `url` (any status: the route may not exist)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer")


def start_bare(
    tmp: Path, sim_speed: float
) -> tuple[dict[str, subprocess.Popen[bytes]], str, Path, str]:
    """Dev server, simulator, front and worker of the bare side; (procs, front url, db,
    the dev server's address)."""
    # Imported here: bench.support picks its port range on import, which a test importing
    # this module's helpers must not do.
    from bench.support import dev_server

    temporal, address = dev_server(tmp)
    sim_port, front_port = free_port(), free_port()
    front = f"http://127.0.0.1:{front_port}"
    (tmp / "blobs").mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LOMO_", "BARE_"))}
    sim_env = base | {
        "LOMO_DATA_DIR": str(tmp),
        "LOMO_SIM_PORT": str(sim_port),
        "LOMO_SIM_SPEED": str(sim_speed),
        "LOMO_CALLBACK_SECRET": SECRET,
    }
    sim = _spawn([sys.executable, "-m", "cli.main", "sim"], sim_env, tmp / "sim.log")
    _wait_http(f"http://127.0.0.1:{sim_port}/files/none", sim)
    env = base | {
        "BARE_TEMPORAL": address,
        "BARE_DB": str(tmp / "bare.db"),
        "BARE_SIM_URL": f"http://127.0.0.1:{sim_port}",
        "BARE_FRONT_URL": front,
        "BARE_SECRET": SECRET,
        "BARE_BLOBS": str(tmp / "blobs"),
        "BARE_PORT": str(front_port),
    }
    procs = {"temporal": temporal, "sim": sim}
    worker_cmd = [sys.executable, "-m", "bench.bare_task", "worker"]
    procs["worker"] = _spawn(worker_cmd, env, tmp / "worker.log")
    procs["front"] = _spawn(
        [sys.executable, "-m", "bench.bare_task", "front"], env, tmp / "front.log"
    )
    _wait_http(f"{front}/", procs["front"])
    return procs, front, tmp / "bare.db", address


def _results(db: Path, keys: list[str]) -> int | None:
    if not db.exists():
        return None
    marks = ",".join("?" * len(keys))
    try:
        rows = read_db(
            db,
            f"SELECT body FROM bare_rows WHERE kind = 'result' AND id IN ({marks})",
            tuple(f"pic:{k}:result" for k in keys),
        )
    except sqlite3.OperationalError:  # the worker has not made its table yet
        return None
    if len(rows) < len(keys):
        return None
    return sum(json.loads(b)["status"] == "succeeded" for (b,) in rows)


async def bare_pictures(
    http: httpx.AsyncClient, front: str, db: Path, keys: list[str], within: float
) -> int:
    async def one(i: int, key: str) -> None:
        r = await http.post(f"{front}/messages", json={"key": key, "text": picture_text(i)})
        r.raise_for_status()

    await asyncio.gather(*(one(i, k) for i, k in enumerate(keys)))
    return await until(lambda: _results(db, keys), within, "the bare pictures")


async def run_bare(tmp: Path, people: int, within: float, sim_speed: float) -> Wave:
    procs, front, db, address = start_bare(tmp, sim_speed)
    try:
        pids = {n: p.pid for n, p in procs.items()}
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=200)) as http:
            await bare_pictures(http, front, db, ["warm"], within)
            keys = [f"p{i}" for i in range(people)]
            wave = await measured(
                "bare",
                pids,
                people,
                lambda: bare_pictures(http, front, db, keys, within),
                temporal=address,
            )
        print(f"  bare pictures: {wave.finished} in {wave.seconds:.0f} s", flush=True)
        return wave
    finally:
        for p in reversed(procs.values()):
            p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


# --- the report ------------------------------------------------------------------------------

LOMO_PARTS = ("temporal", "api", "worker", "memory")
BARE_PARTS = ("temporal", "front", "worker")


def model_ms(wave: Wave) -> float:
    return sum(wave.model.values())


def platform_ms(wave: Wave, parts: tuple[str, ...]) -> float:
    """CPU ms per finished task of the platform's own processes, less the stand-in model."""
    total = sum(wave.cpu[p] for p in parts) - model_ms(wave)
    return total / wave.finished if wave.finished else float("nan")


def wave_table(wave: Wave, parts: tuple[str, ...]) -> str:
    per = wave.per_task
    rows = [
        f"**{wave.name}**: {wave.finished} of {wave.tasks} tasks finished in {wave.seconds:.1f} s"
        + (f", {wave.events / wave.finished:.1f} history events per task" if wave.events else ""),
        "",
        "| process | CPU ms per task | of which the stand-in model | CPU s in the wave |",
        "|---|---|---|---|",
    ]
    for name, ms in wave.cpu.items():
        model = wave.model.get(name, 0.0) / wave.finished if wave.finished else float("nan")
        rows.append(f"| {name} | {per(name):.1f} | {model:.1f} | {ms / 1000:.2f} |")
    joined = " + ".join(parts)
    rows.append(f"| platform ({joined}, less the model) | {platform_ms(wave, parts):.1f} | | |")
    return "\n".join(rows + [f"\n{n}" for n in wave.notes])


def cross_check(wave: Wave, worker: Summary | None) -> None:
    """py-spy's view of the model's share of the worker, beside the counted one."""
    if worker and worker.samples and wave.cpu["worker"]:
        counted = 100 * wave.model.get("worker", 0.0) / wave.cpu["worker"]
        wave.notes.append(
            f"stand-in model in the worker: {counted:.1f} % of its CPU counted, "
            f"{100 * worker.share(MODEL):.1f} % of its {worker.samples} py-spy samples in Python"
        )


def report(lomo: list[Wave], bare: Wave | None, profiles: Profiles, sim_speed: float) -> None:
    for wave in lomo:
        cross_check(wave, profiles.summary(f"worker-{wave.name}"))
    print(f"\n{machine()}; simulator speed {sim_speed}\n")
    for wave in lomo:
        print(wave_table(wave, LOMO_PARTS) + "\n")
    if bare:
        print(wave_table(bare, BARE_PARTS) + "\n")
    if bare and lomo and lomo[0].name == "pictures":
        pics = lomo[0]
        lomo_ms, bare_ms = platform_ms(pics, LOMO_PARTS), platform_ms(bare, BARE_PARTS)
        print(
            f"platform CPU per picture task: lomo {lomo_ms:.1f} ms, bare {bare_ms:.1f} ms, "
            f"ratio {lomo_ms / bare_ms:.2f}x"
        )
        sims = f"lomo {pics.per_task('sim'):.1f} ms, bare {bare.per_task('sim'):.1f} ms"
        model = model_ms(pics) / pics.finished if pics.finished else float("nan")
        print(f"(in neither: the stand-in model {model:.1f} ms, the simulator {sims})")
    for key in sorted(profiles.files):
        if s := profiles.summary(key):
            print(f"\nwhere {key} spent its CPU ({profiles.files[key]})\n")
            print(table(s))


async def main(a: argparse.Namespace) -> None:
    profile = not a.no_profile
    if profile and not PY_SPY.exists():
        raise SystemExit(f"{PY_SPY} is missing: `.venv/bin/uv pip install py-spy`, or --no-profile")
    profiles = Profiles(profile, Path(a.out))
    print(f"started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {machine()}")
    with tempfile.TemporaryDirectory(prefix="lomo-cost-") as d:
        tmp = Path(d)
        (tmp / "lomo").mkdir()
        (tmp / "bare").mkdir()
        lomo = await run_lomo(tmp / "lomo", a.people, a.series, profiles, a.timeout, a.sim_speed)
        bare = None if a.no_bare else await run_bare(tmp / "bare", a.people, a.timeout, a.sim_speed)
    report(lomo, bare, profiles, a.sim_speed)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--people", type=int, default=40, help="picture requests in the wave")
    p.add_argument("--series", type=int, default=5, help="poster series turns (0: none)")
    p.add_argument("--no-profile", action="store_true", help="no py-spy (no model share)")
    p.add_argument("--no-bare", action="store_true", help="only the Lomo side")
    p.add_argument("--out", default=str(OUT), help="where py-spy's stacks go")
    p.add_argument("--sim-speed", type=float, default=SIM_SPEED, help="simulator latency factor")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per wave")
    asyncio.run(main(p.parse_args()))
