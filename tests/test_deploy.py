"""Deployment artefacts: docker-compose.yml, deploy/Dockerfile, and their link to the CLI."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from lomo.bell_notify import is_postgres
from lomo.settings import Settings
from lomo.temporal import SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SCHEMA = Path(__file__).parent / "data" / "compose_spec.json"

# Services that run our own image; their command must be a `lomo` subcommand.
LOMO_SERVICES = ("api", "worker", "sim")


def _load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def _validator() -> jsonschema.Draft201909Validator:
    # The schema declares draft 2019-09 (as "http://json-schema.org/draft/2019-09/schema#", a
    # spelling jsonschema does not look up), so name the validator class explicitly.
    schema = json.loads(SCHEMA.read_text())
    assert "draft/2019-09" in schema["$schema"]
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def _errors(doc: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(doc)]


def test_schema_is_the_compose_spec() -> None:
    schema = json.loads(SCHEMA.read_text())
    assert schema["title"] == "Compose Specification"
    assert "services" in schema["properties"]


def test_compose_file_validates() -> None:
    assert _errors(_load_compose()) == []


def test_compose_has_no_version_key() -> None:
    assert "version" not in _load_compose()


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda d: d["services"]["api"].__setitem__("ports", "not-a-list"), id="ports"),
        pytest.param(lambda d: d.__setitem__("bogus", {}), id="unknown-top-level-key"),
        pytest.param(
            lambda d: d["services"]["worker"]["deploy"].__setitem__("replicas", "two"),
            id="replicas",
        ),
        pytest.param(
            lambda d: d["services"]["worker"]["depends_on"]["api"].__setitem__("condition", "soon"),
            id="depends-on-condition",
        ),
    ],
)
def test_broken_compose_is_rejected(break_it: Any) -> None:
    doc = copy.deepcopy(_load_compose())
    break_it(doc)
    assert _errors(doc), "the schema check must be able to fail"


def test_expected_services_and_wiring() -> None:
    services = _load_compose()["services"]
    for name in ("postgres", "temporal", "temporal-admin-tools", "temporal-ui", "qdrant"):
        assert name in services
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    script = " ".join(services["temporal-admin-tools"]["command"])
    for name, type_ in SEARCH_ATTRIBUTES.items():  # the same list the dev server registers
        assert f"{name}:{type_}" in script
    assert "search-attribute create" in script
    assert services["worker"]["deploy"]["replicas"] == 2
    # Postgres carries the events' wake-ups between processes (lomo/bell_notify.py): the
    # one-host bell's directory is not shared.
    for name in ("api", "worker"):
        assert is_postgres(services[name]["environment"]["LOMO_DATABASE_URL"]), name
        assert not [v for v in services[name]["volumes"] if "bell" in v], name
    assert "lomo-bell" not in _load_compose()["volumes"]
    # Assets the workers store are served by the api: one volume for both (or one bucket).
    assert asset_stores(_load_compose()) == {"api": "lomo-assets", "worker": "lomo-assets"}
    for name in LOMO_SERVICES:
        env = services[name]["environment"]
        assert env["LOMO_MODE"] == "production"
        for secret in ("LOMO_ADMIN_TOKEN", "LOMO_CALLBACK_SECRET", "LOMO_SIM_TOKEN"):
            assert re.fullmatch(rf"\$\{{{secret}:\?.+\}}", env[secret]), secret
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"
        # The services reach each other by name; the health check asks 127.0.0.1.
        hosts = env["LOMO_ALLOWED_HOSTS"].split("$")[0].split(",")
        assert {"api", "sim", "127.0.0.1"} <= set(hosts), hosts


def asset_stores(compose: dict[str, Any]) -> dict[str, str]:
    """Where each of the api and the worker keeps asset bytes: a named volume at the asset
    directory, or `s3` when the environment names a bucket; `local` for the container's own
    disk, which the other service cannot see."""
    assets = str(Settings(data_dir=Path("/data")).resolved_asset_dir)
    named = set(compose.get("volumes") or {})
    found = {}
    for name in ("api", "worker"):
        service = compose["services"][name]
        if service["environment"].get("LOMO_S3_ENDPOINT_URL"):
            found[name] = "s3"
            continue
        mounts = [str(v).split(":") for v in service.get("volumes", [])]
        shared = [m[0] for m in mounts if len(m) > 1 and m[1] == assets and m[0] in named]
        found[name] = shared[0] if shared else "local"
    return found


@pytest.mark.parametrize("service", ["api", "worker"])
def test_assets_unshared_are_caught(service: str) -> None:
    """Not vacuous: a service keeping assets on its own disk is seen as such."""
    doc = copy.deepcopy(_load_compose())
    volumes = doc["services"][service]["volumes"]
    doc["services"][service]["volumes"] = [v for v in volumes if "assets" not in v]
    assert asset_stores(doc)[service] == "local"


def test_the_image_prepares_the_shared_directories() -> None:
    """A named volume takes its owner from the image's directory: the unprivileged user
    must own the asset and bell directories, or the first write fails (the bell's serves
    a container on SQLite)."""
    run = " ".join(rest for kw, rest in _instructions() if kw == "RUN")
    for path in (Settings(data_dir=Path("/data")).resolved_asset_dir, Path("/data/bell")):
        assert str(path) in run.split(), path
    assert "chown -R lomo:lomo /data" in run


def test_prometheus_scrapes_the_api_and_every_worker() -> None:
    services = _load_compose()["services"]
    prom = services["prometheus"]
    mounted = [v.split(":")[0] for v in prom["volumes"]]
    assert "./deploy/prometheus.yml" in mounted
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert jobs["lomo-api"]["static_configs"][0]["targets"] == ["api:8000"]
    port = int(services["worker"]["environment"]["LOMO_WORKER_METRICS_PORT"])
    assert jobs["lomo-worker"]["dns_sd_configs"][0] == {
        "names": ["worker"],
        "type": "A",
        "port": port,
    }
    # The api serves /metrics on the port the compose file publishes.
    from fastapi.testclient import TestClient

    from api.app import create_app
    from lomo.settings import Settings

    # Prometheus sends its target's name as Host: the api must answer to that name.
    allowed = services["api"]["environment"]["LOMO_ALLOWED_HOSTS"].split("$")[0]
    app = create_app(Settings(allowed_hosts=allowed))
    r = TestClient(app, base_url="http://api:8000").get("/metrics")
    assert r.status_code == 200 and "lomo_model_steps_total" in r.text


def test_lomo_service_commands_exist_in_cli() -> None:
    import typer.main

    from cli.main import app

    click_cmd = typer.main.get_command(app)
    names = set(getattr(click_cmd, "commands", {}))
    services = _load_compose()["services"]
    for name in LOMO_SERVICES:
        command = services[name]["command"]
        assert command[0] == "lomo", name
        assert command[1] in names, f"{name}: `lomo {command[1]}` is not a CLI command"


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def test_dockerfile() -> None:
    assert DOCKERFILE.is_file()
    instructions = _instructions()
    stages = [rest for kw, rest in instructions if kw == "FROM"]
    assert instructions[0][0] == "FROM" and stages[-1].startswith("python:3.11-slim")
    copies = [rest for kw, rest in instructions if kw == "COPY"]
    # The web app's libraries: `npm ci` from its lock in a build stage, copied in.
    assert any("npm ci" in rest for kw, rest in instructions if kw == "RUN")
    assert any(c.startswith("--from=") and "web/node_modules" in c for c in copies)
    assert any("uv.lock" in c.split() for c in copies)
    # Every package the project installs is in the image (a moved room must not go missing).
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    copied = {c.split()[0] for c in copies}
    for pattern in packages["packages"]["find"]["include"]:
        assert pattern.rstrip("*") in copied, pattern
    assert any("uv sync --frozen --no-dev" in rest for kw, rest in instructions if kw == "RUN")
    users = [rest for kw, rest in instructions if kw == "USER"]
    assert users and users[-1] not in ("root", "0")
    # Production mode: the image refuses to start without real secrets and allowed hosts.
    env = " ".join(rest for kw, rest in instructions if kw == "ENV")
    assert "LOMO_MODE=production" in env.split()
    assert not any(k in env for k in ("LOMO_ADMIN_TOKEN", "LOMO_CALLBACK_SECRET", "SIM_TOKEN"))
    entry = [rest for kw, rest in instructions if kw in ("CMD", "ENTRYPOINT")]
    assert entry
    assert json.loads(entry[-1])[0] == "lomo"
