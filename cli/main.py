"""The `lomo` command line (docs/operations.md)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, NoReturn

# Before numpy loads OpenBLAS: its thread pool's fork handler waits for busy BLAS threads,
# so a process that spawns a child (the simulator's ffmpeg) while another thread searches
# vectors hung in fork (seen in the test suite). Our own threads parallelize already.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from lomo.settings import Settings, get_settings
from lomo.states import WAITING_TASK, TaskStatus

app = typer.Typer(no_args_is_help=True, add_completion=False)
user_app = typer.Typer(no_args_is_help=True)
app.add_typer(user_app, name="user", help="Manage users.")
deploy_app = typer.Typer(no_args_is_help=True)
app.add_typer(deploy_app, name="deploy", help="Worker Versioning: builds of the worker.")

DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Data directory (LOMO_DATA_DIR, default .lomo)")
]


def _settings(data_dir: Path | None = None) -> Settings:
    """The settings of this command, with the embedded mode's per-install secrets."""
    from lomo.install import with_install_secrets

    if data_dir is not None:
        os.environ["LOMO_DATA_DIR"] = str(data_dir)
        get_settings.cache_clear()
    s = with_install_secrets(get_settings())
    s.data_dir.mkdir(parents=True, exist_ok=True)
    return s


def _serving_settings(data_dir: Path | None) -> Settings:
    """Settings for a command that binds a server: the fixed secrets stop it off loopback."""
    from lomo.errors import ConfigError

    s = _settings(data_dir)
    try:
        s.refuse_fixed_secrets_off_loopback()
    except ConfigError as e:
        logging.getLogger(__name__).error("%s", e)
        raise typer.Exit(2) from None
    return s


@app.callback()
def _main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per plugin is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)


@app.command()
def up(
    data_dir: DataDir = None,
    workers: Annotated[int, typer.Option(min=1, help="worker processes")] = 1,
    apis: Annotated[int, typer.Option(min=1, help="api replicas, each on its own port")] = 1,
) -> None:
    """Start the stack (Temporal, simulator, memory service, workers, api replicas) until
    Ctrl-C."""
    from cli.stack import up as run_up

    raise typer.Exit(run_up(_serving_settings(data_dir), workers, apis))


@app.command()
def temporal(data_dir: DataDir = None) -> None:
    """Run the Temporal dev server on a SQLite file in the data dir (with the Web UI)."""
    from lomo.temporal import dev_server_command

    s = _settings(data_dir)
    import os

    cmd = dev_server_command(
        s.data_dir / "temporal.db", s.host, s.temporal_port, s.temporal_ui_port
    )
    os.execv(cmd[0], cmd)  # become the server, so signals reach it directly


@app.command()
def worker(data_dir: DataDir = None) -> None:
    """Run a worker: all workflows and activities."""
    from cli.worker import main

    s = _settings(data_dir)
    if s.fault_worker_exit_file is not None and s.fault_worker_exit_file.exists():
        # TEST-ONLY hook (lomo/settings.py): lets a test put `lomo up` into a crash loop.
        logging.getLogger(__name__).error("fault hook: worker exits at start")
        raise typer.Exit(3)
    main(s)


@app.command()
def memory(data_dir: DataDir = None) -> None:
    """Run the memory service: the vector index and the memory writes, for every worker."""
    from cli.memory_service import main

    main(_serving_settings(data_dir))


@app.command()
def api(data_dir: DataDir = None, migrate: bool = True) -> None:
    """Run the HTTP API (migrates the database first)."""
    import uvicorn

    from api.app import create_app
    from lomo.db.migrate import upgrade

    s = _serving_settings(data_dir)
    if migrate:
        upgrade(s.resolved_database_url)
    uvicorn.run(create_app(s), host=s.host, port=s.api_port, log_level="warning")


@app.command()
def migrate(
    data_dir: DataDir = None,
    search_attributes: Annotated[
        bool, typer.Option(help="also create Lomo's search attributes in Temporal")
    ] = False,
) -> None:
    """Migrate the database to the current schema and exit (a deployment's one-shot job
    before its api replicas start with --no-migrate)."""
    from lomo.db.migrate import upgrade

    s = _settings(data_dir)
    upgrade(s.resolved_database_url)
    typer.echo("database at the current schema")
    if not search_attributes:
        return
    from cli.deploy import register_search_attributes
    from lomo.temporal import connect

    async def run() -> list[str]:
        return await register_search_attributes(await connect(s))

    created = asyncio.run(run())
    typer.echo(f"search attributes created: {', '.join(created) or 'none missing'}")
    _exit_past_temporal(0)


@app.command()
def sim(data_dir: DataDir = None) -> None:
    """Run the generation simulator."""
    from sim.server import run

    s = _serving_settings(data_dir)
    run(
        s.host,
        s.sim_port,
        s.data_dir / "sim",
        s.callback_secret.get_secret_value(),
        s.sim_speed,
        token=s.sim_token.get_secret_value(),
        allowed_hosts=s.trusted_hosts,
    )


@app.command()
def health(
    part: Annotated[
        str | None, typer.Argument(help="api, worker, memory or sim; default: PID 1's part")
    ] = None,
) -> None:
    """Exit 0 while this container's Lomo process answers its health endpoint, else 1 (the
    image's HEALTHCHECK)."""
    from cli.health import PARTS, check, container_part

    part = part or container_part()
    if part not in PARTS:
        typer.echo(f"not a Lomo part: {part!r} (give one of {', '.join(PARTS)})", err=True)
        raise typer.Exit(2)
    ok, said = check(get_settings(), part)
    typer.echo(said)
    raise typer.Exit(0 if ok else 1)


@user_app.command("add")
def user_add(name: str, data_dir: DataDir = None) -> None:
    """Create a user and print its token (shown once)."""
    from lomo.auth import create_user
    from lomo.db.engine import Database
    from lomo.db.migrate import upgrade

    s = _settings(data_dir)
    upgrade(s.resolved_database_url)

    async def run() -> str:
        db = Database(s.resolved_database_url)
        try:
            async with db.session() as session:
                user, token = await create_user(session, name)
                return json.dumps({"user_id": user.id, "name": user.name, "token": token})
        finally:
            await db.dispose()

    typer.echo(asyncio.run(run()))


@app.command()
def tasks(
    user: Annotated[str | None, typer.Option("--user")] = None,
    stuck: Annotated[
        float | None, typer.Option("--stuck", help="waiting longer than MINUTES")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """List tasks (from the DB projection); --stuck N: live task workflows parked longer
    than N minutes, found through Temporal's search attributes (as in the Web UI)."""
    s = _settings(data_dir)
    if stuck is not None:
        _exit_past_temporal(asyncio.run(_stuck(s, stuck, user)))
    from sqlalchemy import select

    from lomo.db.engine import Database
    from lomo.db.models import Task

    async def run() -> list[Task]:
        db = Database(s.resolved_database_url)
        try:
            async with db.session() as session:
                q = select(Task).order_by(Task.created_at)
                if user:
                    q = q.where(Task.user_id == user)
                return list(await session.scalars(q))
        finally:
            await db.dispose()

    for t in asyncio.run(run()):
        typer.echo(
            f"{t.id}\t{t.user_id}\t{t.kind}\t{t.status}\t{t.updated_at:%Y-%m-%dT%H:%M:%S}\t{t.goal[:60]}"
        )


def stuck_query(minutes: float, user: str | None, now: datetime) -> str:
    """The visibility query an operator would type into the Temporal Web UI."""
    cutoff = (now - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # In the enum's order, so the query reads the same every time.
    waiting = ", ".join(f'"{s}"' for s in TaskStatus if s in WAITING_TASK)
    q = (
        'WorkflowType = "TaskWorkflow" AND ExecutionStatus = "Running" AND '
        f"LomoTaskStatus IN ({waiting}) AND "
        f'LomoWaitingSince < "{cutoff}"'
    )
    return q + (f' AND LomoUserId = "{user}"' if user else "")


async def _stuck(s: Settings, minutes: float, user: str | None) -> int:
    from lomo.temporal import connect

    try:
        client = await asyncio.wait_for(connect(s), 30)
    except (RuntimeError, TimeoutError) as e:
        typer.echo(f"cannot reach Temporal at {s.resolved_temporal_address}: {e}", err=True)
        return 2
    query = stuck_query(minutes, user, datetime.now(UTC))
    async for wf in client.list_workflows(query):
        attrs = wf.typed_search_attributes
        status = next((p.value for p in attrs if p.key.name == "LomoTaskStatus"), "")
        since = next((p.value for p in attrs if p.key.name == "LomoWaitingSince"), None)
        typer.echo(
            f"{wf.id}\t{status}\twaiting since {since:%Y-%m-%dT%H:%M:%S}"
            if since
            else f"{wf.id}\t{status}"
        )
    return 0


@app.command()
def replay(
    workflow_id: Annotated[str | None, typer.Argument()] = None,
    file: Annotated[Path | None, typer.Option("--file", help="history JSON file")] = None,
    data_dir: DataDir = None,
) -> None:
    """Replay a history against the current workflow code; exit 1 on nondeterminism."""
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from cli.worker import WORKFLOWS
    from lomo.temporal import connect

    if (workflow_id is None) == (file is None):
        raise typer.BadParameter("give exactly one of WORKFLOW_ID or --file")
    s = _settings(data_dir)

    async def run() -> None:
        if file is not None:
            history = WorkflowHistory.from_json(file.stem, file.read_text())
        else:
            client = await connect(s)
            history = await client.get_workflow_handle(workflow_id or "").fetch_history()
        await Replayer(workflows=WORKFLOWS).replay_workflow(history)

    try:
        asyncio.run(run())
    except Exception as e:
        typer.echo(f"replay failed: {e}", err=True)
        _exit_past_temporal(1)
    typer.echo("replay ok")
    _exit_past_temporal(0)


@deploy_app.command("current")
def deploy_current(
    build_id: Annotated[str, typer.Argument(help="the build to route new runs to")],
    data_dir: DataDir = None,
) -> None:
    """Make a worker build current: new runs start on it, pinned runs stay where they are."""
    from cli.deploy import set_current
    from lomo.errors import ConfigError
    from lomo.temporal import connect

    s = _settings(data_dir)

    async def run() -> None:
        await set_current(await connect(s), s.deployment_name, build_id)

    try:
        asyncio.run(run())
    except ConfigError as e:
        typer.echo(str(e), err=True)
        _exit_past_temporal(1)
    typer.echo(f"{s.deployment_name}: {build_id} is current")
    _exit_past_temporal(0)


@deploy_app.command("status")
def deploy_status(data_dir: DataDir = None) -> None:
    """The deployment's builds: status (CURRENT, DRAINING, DRAINED, ...) and drainage."""
    from cli.deploy import builds
    from lomo.temporal import connect

    s = _settings(data_dir)

    async def run() -> None:
        for b in await builds(await connect(s), s.deployment_name):
            typer.echo(f"{b.build_id}\t{b.status}\t{b.drainage}")

    asyncio.run(run())
    _exit_past_temporal(0)


@app.command("memory-vectors")
def memory_vectors(
    user: Annotated[str, typer.Option(help="the person's user id")],
    text: Annotated[list[str], typer.Argument(help="texts to search for")],
    limit: int = 20,
    data_dir: DataDir = None,
) -> None:
    """Operator read path: the person's memory-index points nearest to each text, one JSON
    line per text ({text, hits: [{id, memory_id, score}]}; a hit's id is a memory version
    id). Through the memory service when `LOMO_MEMORY_URL` is set; else the embedded index
    belongs to the worker: run this only while no worker runs."""
    from memory.services import MemoryServices
    from vectors import open_vector_index
    from vectors.embeddings import get_embedder

    settings = _settings(data_dir)

    async def run() -> None:
        svc = MemoryServices(open_vector_index(settings), get_embedder(settings))
        try:
            await svc.ready()
            for t, vec in zip(text, await svc.embed(list(text)), strict=True):
                hits = await svc.index.search(svc.collection, vec, limit, {"user_id": user})
                found = [
                    {"id": h.id, "memory_id": h.payload.get("memory_id"), "score": h.score}
                    for h in hits
                ]
                typer.echo(json.dumps({"text": t, "hits": found}, ensure_ascii=False))
        finally:
            await svc.index.close()

    asyncio.run(run())


@app.command()
def scenarios(
    story: Annotated[list[str] | None, typer.Option("--story", help="only these stories")] = None,
    lang: Annotated[list[str] | None, typer.Option("--lang", help="en, de (default both)")] = None,
    faults: Annotated[bool, typer.Option(help="kill worker/Temporal, simulator faults")] = False,
    postgres: Annotated[bool, typer.Option(help="on a private PostgreSQL cluster")] = False,
    short: Annotated[bool, typer.Option(help="only the short subset")] = False,
    fault_every: Annotated[float, typer.Option(help="seconds between faults, at least")] = 20.0,
    seed: int = 15,
    data_dir: DataDir = None,
) -> None:
    """Run the simulated person's stories on a fresh embedded stack and print the figures
    (continue nudges, unneeded confirmations, duplicates, split copies, stale writes,
    resurfaced facts, language, routing); exit 1 if any figure is off its mark."""
    import tempfile

    from scenarios.run import LANGS, report, run, select

    try:
        chosen = select(story or (), short)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e
    root = data_dir or Path(tempfile.mkdtemp(prefix="lomo-scenarios-"))
    result = run(
        root / "stack",
        [(s, lg) for s in chosen for lg in (lang or LANGS)],
        faults=faults,
        postgres=postgres,
        seed=seed,
        fault_every=fault_every,
        write=lambda line: (sys.stdout.write(line), sys.stdout.flush()) and None,
    )
    typer.echo(report(result))
    typer.echo(f"data and logs kept in {root}")
    raise typer.Exit(0 if result.ok else 1)


def _exit_past_temporal(code: int) -> NoReturn:
    """End a command that used the Temporal SDK (client or replayer) without interpreter
    finalization: the SDK core's runtime threads can race it and abort the process (seen
    here about 1 run in 30, after a failed connect and after a nondeterminism error). The
    answer is printed by then, so nothing is lost."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(app())
