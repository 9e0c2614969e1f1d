"""Deployment artefacts: docker-compose.yml, deploy/Dockerfile, and their link to the CLI,
the settings and the versions the tests run."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from lomo.bell_notify import is_postgres
from lomo.settings import Settings
from lomo.temporal import SEARCH_ATTRIBUTES
from tests.deploy_support import dev_server_versions, minor, pinned, qdrant_client_version

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SCHEMA = Path(__file__).parent / "data" / "compose_spec.json"

# Services that run our own image; their command must be a `lomo` subcommand.
LOMO_SERVICES = ("migrate", "memory", "api", "worker", "sim")
# The long-running services; the one-shot jobs (exit 0) are the others.
ONE_SHOT = ("temporal-schema", "temporal-admin-tools", "migrate")


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
    for name in ("postgres", "temporal-schema", "temporal", "temporal-admin-tools", "temporal-ui"):
        assert name in services
    assert "qdrant" in services and "memory" in services
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["image"].startswith("temporalio/server:")
    assert not [s for s in services.values() if "auto-setup" in s.get("image", "")]
    # The server starts on a schema the one-shot job finished for both databases.
    assert services["temporal"]["depends_on"] == {
        "temporal-schema": {"condition": "service_completed_successfully"}
    }
    schema = " ".join(services["temporal-schema"]["command"])
    assert "temporal:temporal" in schema and "temporal_visibility:visibility" in schema
    assert "update-schema" in schema
    assert services["temporal-schema"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    script = " ".join(services["temporal-admin-tools"]["command"])
    for name, type_ in SEARCH_ATTRIBUTES.items():  # the same list the dev server registers
        assert f"{name}:{type_}" in script
    assert "search-attribute create" in script and "namespace create" in script
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
        assert env["LOMO_MEMORY_URL"] == "http://memory:8300"
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"
        # The services reach each other by name; the health check asks 127.0.0.1.
        hosts = env["LOMO_ALLOWED_HOSTS"].split("$")[0].split(",")
        assert {"api", "sim", "127.0.0.1"} <= set(hosts), hosts


SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PWD|_KEY$")


def _secrets(compose: dict[str, Any]) -> dict[str, str]:
    """Every variable of every service whose name says it holds a secret."""
    found = {}
    for name, service in compose["services"].items():
        for var, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(var):
                found[f"{name}.{var}"] = str(value)
    return found


def test_every_secret_comes_from_the_environment() -> None:
    secrets = _secrets(_load_compose())
    assert "api.LOMO_ADMIN_TOKEN" in secrets and "temporal.POSTGRES_PWD" in secrets
    for where, value in secrets.items():
        # Required (`:?`), or optional and empty by default (`:-}`): never a literal.
        assert re.fullmatch(r"\$\{[A-Z_]+:(\?.+|-)\}", value), f"{where}: {value}"
    url = _load_compose()["services"]["api"]["environment"]["LOMO_DATABASE_URL"]
    assert "${POSTGRES_PASSWORD:?" in url


def test_a_literal_secret_is_caught() -> None:
    doc = copy.deepcopy(_load_compose())
    doc["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] = "lomo"
    assert not all(re.fullmatch(r"\$\{[A-Z_]+:(\?.+|-)\}", v) for v in _secrets(doc).values())


def test_every_lomo_variable_is_a_setting() -> None:
    fields = set(Settings.model_fields)
    aliases = {str(f.validation_alias) for f in Settings.model_fields.values()} - {"None"}
    services = _load_compose()["services"]
    for name in LOMO_SERVICES:
        for var in services[name]["environment"]:
            known = var in aliases or (
                var.startswith("LOMO_") and var.removeprefix("LOMO_").lower() in fields
            )
            assert known, f"{name}: {var} is not a setting (lomo/settings.py)"


def test_every_long_running_service_has_a_health_check_and_waits_on_one() -> None:
    services = _load_compose()["services"]
    for name, service in services.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no", name
            continue
        if name not in ("temporal-ui", "prometheus"):  # nothing waits on those two
            assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
        for dep, cond in (service.get("depends_on") or {}).items():
            want = "service_completed_successfully" if dep in ONE_SHOT else "service_healthy"
            if dep == "worker":  # replicas: Prometheus finds them by DNS as they come
                want = "service_started"
            assert cond["condition"] == want, f"{name} -> {dep}"
    for name in LOMO_SERVICES:
        if name not in ONE_SHOT:
            test = services[name]["healthcheck"]["test"]
            assert test == ["CMD", "lomo", "health", name], name


def test_pinned_versions_are_the_ones_the_tests_run() -> None:
    versions = pinned()
    services = _load_compose()["services"]
    images = {name: s["image"] for name, s in services.items() if "image" in s}
    expected = {
        "postgres": "postgres:${POSTGRES_VERSION",
        "temporal-schema": "temporalio/admin-tools:${TEMPORAL_ADMINTOOLS_VERSION",
        "temporal": "temporalio/server:${TEMPORAL_VERSION",
        "temporal-admin-tools": "temporalio/admin-tools:${TEMPORAL_ADMINTOOLS_VERSION",
        "temporal-ui": "temporalio/ui:${TEMPORAL_UI_VERSION",
        "qdrant": "qdrant/qdrant:${QDRANT_VERSION",
        "prometheus": "prom/prometheus:${PROMETHEUS_VERSION",
    }
    for name, prefix in expected.items():
        assert images[name].startswith(prefix + ":?"), images[name]
        assert prefix.split("${")[1] in versions, name
    dev = dev_server_versions()
    assert versions["TEMPORAL_VERSION"] == dev["server"]
    assert versions["TEMPORAL_ADMINTOOLS_VERSION"] == dev["server"]
    assert versions["TEMPORAL_UI_VERSION"] == dev["ui"]
    # qdrant-client supports a server within one minor version of its own.
    server, client = minor(versions["QDRANT_VERSION"]), minor(qdrant_client_version())
    assert server[0] == client[0] and abs(server[1] - client[1]) <= 1, (server, client)
    assert versions["POSTGRES_VERSION"] == "16"


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
    must own the asset, bell and simulator directories, or the first write fails (the
    bell's serves a container on SQLite)."""
    run = " ".join(rest for kw, rest in _instructions() if kw == "RUN")
    compose = _load_compose()
    mounted = {
        v.split(":")[1]
        for name in LOMO_SERVICES
        for v in compose["services"][name].get("volumes", [])
        if v.split(":")[0] in compose["volumes"]
    }
    assert mounted == {"/data/assets", "/data/sim"}
    for path in (Settings(data_dir=Path("/data")).resolved_asset_dir, Path("/data/bell")):
        assert str(path) in mounted | {"/data/bell"}, path
    for path in mounted | {"/data/bell"}:
        assert path in run.split(), path
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
    commands = cli_commands()
    services = _load_compose()["services"]
    for name in LOMO_SERVICES:
        lomo, sub, *args = services[name]["command"]
        assert lomo == "lomo", name
        assert sub in commands, f"{name}: `lomo {sub}` is not a CLI command"
        # Its options parse as the CLI's own (a renamed flag fails here, not at deploy).
        commands[sub].make_context(sub, list(args))
    assert "health" in commands


def cli_commands() -> dict[str, Any]:
    """The `lomo` command's subcommands, by name (click commands)."""
    import typer.main

    from cli.main import app

    commands: dict[str, Any] = getattr(typer.main.get_command(app), "commands", {})
    return commands


def test_a_wrong_flag_is_caught() -> None:
    with pytest.raises(Exception, match="No such option"):
        cli_commands()["api"].make_context("api", ["--no-migrations"])


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
    runs = [rest for kw, rest in instructions if kw == "RUN"]
    # The web app's libraries: `npm ci` from its lock in a build stage, copied in.
    assert any("npm ci" in rest for rest in runs)
    assert any(c.startswith("--from=") and "web/node_modules" in c for c in copies)
    # The image installs the wheel built from the tree with the lock's pins, never a list
    # of folders (tests/test_package.py installs the same wheel the same way).
    assert any("uv build" in r and "--wheel" in r for r in runs)
    assert any("uv export --frozen --no-dev" in r for r in runs)
    assert any("uv pip install" in r and "lomo-*.whl" in r for r in runs)
    final = instructions[[i for i, (kw, _) in enumerate(instructions) if kw == "FROM"][-1] :]
    assert not [c for kw, c in final if kw == "COPY" and not c.startswith("--from=")], (
        "the runtime stage copies only what the build stage made"
    )
    health = [rest for kw, rest in instructions if kw == "HEALTHCHECK"]
    assert health and health[-1].endswith('CMD ["lomo", "health"]')
    users = [rest for kw, rest in instructions if kw == "USER"]
    assert users and users[-1] not in ("root", "0")
    # Production mode: the image refuses to start without real secrets and allowed hosts.
    env = " ".join(rest for kw, rest in instructions if kw == "ENV")
    assert "LOMO_MODE=production" in env.split()
    assert not any(k in env for k in ("LOMO_ADMIN_TOKEN", "LOMO_CALLBACK_SECRET", "SIM_TOKEN"))
    entry = [rest for kw, rest in instructions if kw in ("CMD", "ENTRYPOINT")]
    assert entry
    assert json.loads(entry[-1])[0] == "lomo"
