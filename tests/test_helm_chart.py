"""The Helm chart deploy/helm/lomo, checked offline: rendered by Helm's own Go SDK
(helm-python-sdk, no helm binary, no cluster) with a small and a large values file, and
every manifest validated strictly against the Kubernetes OpenAPI schemas that
kubernetes-validate bundles. Then the objects themselves: names, ports, probes, hooks,
secrets by reference only, settings that exist, versions that match the tests'."""

from __future__ import annotations

import copy
import re
import tomllib
from functools import cache
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from lomo.settings import Settings
from tests.deploy_support import ROOT, minor, pinned, qdrant_client_version
from tests.test_deploy import cli_commands

CHART = ROOT / "deploy" / "helm" / "lomo"
VALUES = ROOT / "deploy" / "helm" / "values"
# The Kubernetes version the SDK's render reports in .Capabilities, validated against.
KUBE_VERSION = "1.36.0"
RELEASE = "lomo"
SECRET_KEYS = {
    "LOMO_ADMIN_TOKEN",
    "LOMO_CALLBACK_SECRET",
    "LOMO_SIM_TOKEN",
    "LOMO_DATABASE_URL",
    "ANTHROPIC_API_KEY",
    "LOMO_S3_ACCESS_KEY",
    "LOMO_S3_SECRET_KEY",
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name=RELEASE, namespace="lomo", is_install=True)
    return [doc for text in out.values() for doc in yaml.safe_load_all(text) if doc]


@cache
def values_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((VALUES / f"{name}.yaml").read_text())
    return loaded


@cache
def _rendered(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(render(values_file(name)))


def rendered(name: str) -> list[dict[str, Any]]:
    return copy.deepcopy(list(_rendered(name)))


def by_kind(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    template = doc.get("spec", {}).get("template", {})
    return list(template.get("spec", {}).get("containers", []))


SMALL = {
    ("ConfigMap", "lomo-config"),
    ("Secret", "lomo-secrets"),
    ("Job", "lomo-migrate"),
    ("Job", "lomo-make-current"),
    ("Deployment", "lomo-api"),
    ("Service", "lomo-api"),
    ("PodDisruptionBudget", "lomo-api"),
    ("Deployment", "lomo-memory"),
    ("Service", "lomo-memory"),
    ("Deployment", "lomo-worker-0-1-0"),
    ("PodDisruptionBudget", "lomo-worker"),
    ("Deployment", "lomo-sim"),
    ("Service", "lomo-sim"),
}
LARGE = (
    SMALL - {("Secret", "lomo-secrets"), ("Deployment", "lomo-sim"), ("Service", "lomo-sim")}
) | {
    ("HorizontalPodAutoscaler", "lomo-api"),
    ("HorizontalPodAutoscaler", "lomo-worker-0-1-0"),
    ("Deployment", "lomo-worker-0-0-9"),
}


@pytest.mark.parametrize(("name", "expected"), [("small", SMALL), ("large", LARGE)])
def test_rendered_objects(name: str, expected: set[tuple[str, str]]) -> None:
    assert set(by_kind(rendered(name))) == expected


def test_helm_lint_is_clean() -> None:
    for name in ("small", "large"):
        found = helm.lint(str(CHART), values_file(name), strict=True, kube_version=KUBE_VERSION)
        # Helm's severities: 1 info (e.g. "icon is recommended"), 2 warning, 3 error.
        messages = [m for m in found.get("messages", []) if m["severity"] > 1]
        assert not found.get("errors") and not messages, found


@pytest.mark.parametrize("name", ["small", "large"])
def test_every_manifest_validates_strictly(name: str) -> None:
    for doc in rendered(name):
        # Raises on a schema error, an unknown field (strict) or an unknown kind.
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_validator_rejects_what_kubernetes_would() -> None:
    doc = by_kind(rendered("small"))[("Deployment", "lomo-api")]
    containers(doc)[0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    doc = by_kind(rendered("small"))[("Service", "lomo-api")]
    doc["spec"]["ports"][0]["port"] = "eight thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


PARTS = {
    # part: (container port, readiness path, liveness path)
    "api": (8000, "/readyz", "/healthz"),
    "memory": (8300, "/healthz", "/healthz"),
    "sim": (8100, "/healthz", "/healthz"),
    "worker-0-1-0": (9464, "/metrics", "/metrics"),
}


def test_ports_probes_and_commands() -> None:
    objects = by_kind(rendered("small"))
    commands = cli_commands()
    for part, (port, ready, alive) in PARTS.items():
        (c,) = containers(objects[("Deployment", f"lomo-{part}")])
        assert [p["containerPort"] for p in c["ports"]] == [port], part
        name = c["ports"][0]["name"]
        for probe, path in (("readinessProbe", ready), ("livenessProbe", alive)):
            get = c[probe]["httpGet"]
            assert (get["path"], get["port"]) == (path, name), (part, probe)
            # The Host the probe sends is one the part answers to.
            assert {"name": "Host", "value": "localhost"} in get["httpHeaders"]
        lomo, sub, *args = c["command"]
        assert lomo == "lomo" and sub in commands, c["command"]
        commands[sub].make_context(sub, args)
        service = objects.get(("Service", f"lomo-{part}"))
        if service is not None:
            assert service["spec"]["ports"][0]["port"] == port
            assert (
                service["spec"]["selector"]
                == objects[("Deployment", f"lomo-{part}")]["spec"]["selector"]["matchLabels"]
            )
    config = objects[("ConfigMap", "lomo-config")]["data"]
    assert "localhost" in config["LOMO_ALLOWED_HOSTS"].split(",")
    assert config["LOMO_MEMORY_URL"] == "http://lomo-memory:8300"
    assert config["LOMO_SIM_URL"] == "http://lomo-sim:8100"
    for doc in objects.values():
        if containers(doc):  # every pod runs as the image's unprivileged user
            assert doc["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_migration_runs_before_install_and_upgrade() -> None:
    objects = by_kind(rendered("small"))
    job = objects[("Job", "lomo-migrate")]
    notes = job["metadata"]["annotations"]
    assert notes["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert containers(job)[0]["command"] == ["lomo", "migrate", "--search-attributes"]
    cli_commands()["migrate"].make_context("migrate", ["--search-attributes"])
    # What the job reads exists before it: the same hooks, an earlier weight.
    weight = int(notes["helm.sh/hook-weight"])
    for key in (("ConfigMap", "lomo-config"), ("Secret", "lomo-secrets")):
        theirs = objects[key]["metadata"]["annotations"]
        assert theirs["helm.sh/hook"] == "pre-install,pre-upgrade", key
        assert int(theirs["helm.sh/hook-weight"]) < weight, key
    api = containers(objects[("Deployment", "lomo-api")])[0]
    assert api["command"] == ["lomo", "api", "--no-migrate"]


def _env_refs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["metadata"]["name"], e) for d in docs for c in containers(d) for e in c["env"]]


@pytest.mark.parametrize("name", ["small", "large"])
def test_secrets_are_referenced_never_inlined(name: str) -> None:
    docs = rendered(name)
    secret = values_file(name)["secrets"].get("existingSecret") or "lomo-secrets"
    refs = _env_refs(docs)
    for where, e in refs:
        if e["name"] in SECRET_KEYS:
            assert "value" not in e, (where, e)
            assert e["valueFrom"]["secretKeyRef"] == {
                "name": secret,
                "key": e["name"],
                **({"optional": True} if e["valueFrom"]["secretKeyRef"].get("optional") else {}),
            }, (where, e)
        else:
            assert e["name"] == "LOMO_WORKER_BUILD_ID", (where, e)
    every = {(w, e["name"]) for w, e in refs}
    for part in ("lomo-api", "lomo-memory", "lomo-worker-0-1-0", "lomo-migrate"):
        assert (part, "LOMO_ADMIN_TOKEN") in every and (part, "LOMO_DATABASE_URL") in every
    config = by_kind(docs)[("ConfigMap", "lomo-config")]["data"]
    assert not SECRET_KEYS & set(config)
    # No secret value appears outside the Secret.
    given = [v for k, v in values_file(name)["secrets"].items() if k != "existingSecret" and v]
    outside = yaml.safe_dump([d for d in docs if d["kind"] != "Secret"])
    assert not [v for v in given if v in outside]
    assert (("Secret", "lomo-secrets") in by_kind(docs)) == (secret == "lomo-secrets")


def test_every_setting_the_chart_sets_exists() -> None:
    fields = set(Settings.model_fields)
    aliases = {str(f.validation_alias) for f in Settings.model_fields.values()} - {"None"}
    for name in ("small", "large"):
        docs = rendered(name)
        config = by_kind(docs)[("ConfigMap", "lomo-config")]["data"]
        names = set(config) | {e["name"] for _, e in _env_refs(docs)}
        for var in names:
            known = var in aliases or var.removeprefix("LOMO_").lower() in fields
            assert var.startswith("LOMO_") or var in aliases, var
            assert known, f"{name}: {var} is not a setting (lomo/settings.py)"


def test_workers_drain_within_their_grace_period() -> None:
    values = values_file("large")
    heartbeat = Settings().heartbeat_timeout_seconds
    objects = by_kind(rendered("large"))
    config = objects[("ConfigMap", "lomo-config")]["data"]
    assert float(config["LOMO_HEARTBEAT_TIMEOUT_SECONDS"]) == heartbeat
    for build in ("0-1-0", "0-0-9"):
        spec = objects[("Deployment", f"lomo-worker-{build}")]["spec"]["template"]["spec"]
        assert spec["terminationGracePeriodSeconds"] > heartbeat
    short = copy.deepcopy(values)
    short["worker"] = {**short["worker"], "terminationGracePeriodSeconds": int(heartbeat)}
    with pytest.raises(helm.HelmError, match="longer than heartbeatTimeoutSeconds"):
        render(short)


def test_worker_builds_come_from_the_release() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == project
    small = by_kind(rendered("small"))
    (worker,) = containers(small[("Deployment", "lomo-worker-0-1-0")])
    env = {e["name"]: e.get("value") for e in worker["env"]}
    assert env["LOMO_WORKER_BUILD_ID"] == chart["appVersion"]
    assert worker["image"] == f"lomo:{chart['appVersion']}"
    make_current = containers(small[("Job", "lomo-make-current")])[0]["command"]
    assert make_current == ["lomo", "deploy", "current", chart["appVersion"]]
    assert small[("Job", "lomo-make-current")]["metadata"]["annotations"]["helm.sh/hook"] == (
        "post-install,post-upgrade"
    )
    # A draining build keeps its own workers and image beside the current one.
    large = by_kind(rendered("large"))
    (old,) = containers(large[("Deployment", "lomo-worker-0-0-9")])
    assert old["image"].endswith(":0.0.9")
    assert {"name": "LOMO_WORKER_BUILD_ID", "value": "0.0.9"} in old["env"]
    assert "replicas" in large[("Deployment", "lomo-worker-0-0-9")]["spec"]
    assert "replicas" not in large[("Deployment", "lomo-worker-0-1-0")]["spec"]  # the HPA's


def test_hpa_and_pdb_target_apis_and_workers() -> None:
    objects = by_kind(rendered("large"))
    for name, target in (("lomo-api", "lomo-api"), ("lomo-worker-0-1-0", "lomo-worker-0-1-0")):
        hpa = objects[("HorizontalPodAutoscaler", name)]["spec"]
        assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": target}  # fmt: skip
        assert hpa["minReplicas"] >= 2
    for part in ("api", "worker"):
        pdb = objects[("PodDisruptionBudget", f"lomo-{part}")]["spec"]
        assert pdb["minAvailable"] == 2
        assert pdb["selector"]["matchLabels"]["app.kubernetes.io/component"] == part


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v: v["secrets"].pop("adminToken"), "secrets.adminToken"),
        (lambda v: v.pop("assets"), "assets"),
        (lambda v: v["sim"].update(enabled=False), "generationUrl is required"),
    ],
)
def test_missing_values_fail_the_render(change: Any, message: str) -> None:
    values = copy.deepcopy(values_file("small"))
    change(values)
    if "assets" not in values:
        values["assets"] = {"s3": {"endpointUrl": ""}, "existingClaim": ""}
    with pytest.raises(helm.HelmError, match=re.escape(message)):
        render(values)


def test_the_official_charts_values_pin_the_tests_versions() -> None:
    versions = pinned()
    temporal = values_file("temporal")
    assert temporal["server"]["image"]["tag"] == versions["TEMPORAL_VERSION"]
    assert temporal["admintools"]["image"]["tag"] == versions["TEMPORAL_ADMINTOOLS_VERSION"]
    assert temporal["web"]["image"]["tag"] == versions["TEMPORAL_UI_VERSION"]
    persistence = temporal["server"]["config"]["persistence"]
    assert persistence["default"]["sql"]["database"] == "temporal"
    assert persistence["visibility"]["sql"]["database"] == "temporal_visibility"
    qdrant = values_file("qdrant")
    assert qdrant["image"]["tag"] == versions["QDRANT_VERSION"]
    assert minor(qdrant["image"]["tag"])[1] - minor(qdrant_client_version())[1] in (-1, 0, 1)
