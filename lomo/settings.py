"""One typed settings object for every process; the only place that reads LOMO_* variables."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lomo.errors import ConfigError

PLACEHOLDER_SECRETS = frozenset({"", "changeme", "change-me", "secret", "placeholder", "dev"})
# Fixed stand-ins for in-process tests. `lomo` commands replace them in the embedded mode
# with secrets generated per data directory (lomo/install.py), and refuse them off loopback.
EMBEDDED_CALLBACK_SECRET = "embedded-callback-secret"
EMBEDDED_ADMIN_TOKEN = "lomo-admin-embedded"
EMBEDDED_SIM_TOKEN = "lomo-sim-embedded"
FIXED_SECRETS = {
    "admin_token": EMBEDDED_ADMIN_TOKEN,
    "callback_secret": EMBEDDED_CALLBACK_SECRET,
    "sim_token": EMBEDDED_SIM_TOKEN,
}
# The Host names the embedded default answers to: a DNS-rebinding page carries its own.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOMO_", extra="ignore")

    mode: Literal["embedded", "production"] = "embedded"
    data_dir: Path = Path(".lomo")

    # Network
    host: str = "127.0.0.1"
    api_port: int = 8000
    temporal_port: int = 7233
    temporal_ui_port: int = 8233
    sim_port: int = 8100
    memory_port: int = 8300  # `lomo memory` (the memory service) listens here
    temporal_address: str | None = None  # default: host:temporal_port
    temporal_namespace: str = "default"
    task_queue: str = "lomo"
    # Worker Versioning (docs/operations.md "Deploying a new worker build"): set, the worker
    # polls as this build of the deployment; unset, it is an unversioned worker.
    worker_build_id: str | None = None
    deployment_name: str = "lomo"
    api_url: str | None = None  # how the simulator reaches the api; default from host/port
    sim_url: str | None = None  # how the worker reaches the generation upstream
    # How workers and the api reach the memory service (`lomo memory`); unset → memory runs
    # inside the one worker process (its vector index belongs to that process).
    memory_url: str | None = None

    # Storage
    database_url: str | None = None  # default: SQLite file in data_dir
    vector_url: str | None = None  # Qdrant server; None → embedded engine in data_dir
    asset_dir: Path | None = None
    # S3-compatible asset store (production); unset → the asset directory.
    s3_endpoint_url: str | None = None
    s3_bucket: str = "lomo-assets"
    s3_region: str = "us-east-1"
    s3_access_key: SecretStr | None = None
    s3_secret_key: SecretStr | None = None

    # Host header names the api and the simulator answer to, comma-separated; required in
    # production. Unset in the embedded mode: loopback names and the bound address only.
    allowed_hosts: str = ""

    # Secrets
    admin_token: SecretStr = SecretStr(EMBEDDED_ADMIN_TOKEN)
    callback_secret: SecretStr = SecretStr(EMBEDDED_CALLBACK_SECRET)
    sim_token: SecretStr = SecretStr(EMBEDDED_SIM_TOKEN)  # the simulator's fault/listing calls
    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    # Send domain tools deferred (the API's advanced-tool-use beta) only when it is known to
    # work with the API in use; by default they go as plain tool lists, and a refusal of
    # the beta falls back to plain lists within the same step.
    anthropic_deferred_tools: bool = False
    model_provider: Literal["auto", "anthropic", "offline"] = "auto"

    # Runtime limits (short in tests; docs/operations.md#configuration)
    max_message_chars: int = 20_000
    max_upload_bytes: int = 50 * 1024 * 1024  # one asset; its JSON body may be 4/3 + 64 KiB
    # Hostile input (docs/api.md#limits). The token rate and the stream limit are counted in
    # each api process: with N replicas behind a balancer a token gets up to N times these.
    rate_limit_per_minute: int = 3000  # requests per bearer token, refilled evenly; 0 = off
    rate_limit_burst: int = 300  # requests a token may make at once before the rate applies
    max_sse_per_person: int = 8  # open /v1/events streams per person
    # How often an open event stream reads the log without a wake-up: the bell wakes it at
    # once for every commit (Postgres NOTIFY, or on SQLite this host's lomo/bell_relay.py),
    # so this bounds only what it misses.
    sse_poll_seconds: float = Field(default=0.25, gt=0)
    callback_max_age_seconds: float = 300.0  # a callback signature's freshness window (±)
    max_steps_per_turn: int = 8
    max_turns_without_progress: int = 2
    generation_wait_seconds: float = 60.0  # wait for a callback before polling the upstream
    card_wait_seconds: float = 300.0  # re-read open cards after this long (lost wake-ups)
    # The wait between polls of a job, and between re-reads of an open card, doubles from
    # the values above up to these caps: a job or card left for days adds few events to
    # its workflow's history instead of a dozen per wait.
    generation_wait_max_seconds: float = Field(default=600.0, gt=0)
    card_wait_max_seconds: float = Field(default=3600.0, gt=0)
    # A job the upstream has not finished this long after its order was placed is failed
    # and refunded at its next poll, by kind (a kind not named here: the longest).
    generation_deadline_seconds: dict[str, float] = Field(
        default_factory=lambda: {"image": 1800.0, "audio": 1800.0, "3d": 3600.0, "video": 3600.0}
    )
    # A stored message not handed to Temporal this long after it came is handed over by
    # the api's relay (a hand-off that failed and was never retried); 0 turns it off.
    handoff_relay_seconds: float = Field(default=30.0, ge=0)
    # A request's hand-off to Temporal of what it stored (a message to its task or the main
    # thread and to memory extraction; a card answer's effect and its task's and flow run's
    # wake-up) waits at most this long, the client's connect and retries included; past
    # it the stored message or answer is returned and the relay finishes the hand-off (a
    # relay round waits as long per item). Above `memory_forget_wait_seconds`, so a
    # confirmed forget normally runs before the answer returns.
    handoff_wait_seconds: float = Field(default=30.0, gt=0)
    heartbeat_timeout_seconds: float = 30.0  # a dead worker's activity is retried after this
    # A turn shows as `running` in the LomoTaskStatus search attribute once it has run this
    # long: a shorter turn never touches visibility (workflows/task.py).
    running_visible_seconds: float = Field(default=2.0, gt=0)
    # A turn's `running` status (and its event) is written once the model has thought this
    # long, or with its answer if that comes first (journal/running.py).
    running_event_seconds: float = Field(default=0.25, ge=0)
    # A step's streamed reply reaches the event log in pieces at most this often
    # (`reply.delta` events; journal/drafts.py).
    stream_flush_seconds: float = Field(default=0.15, ge=0)
    # The offline model answers whole; its text is streamed at this reading pace
    # (characters per second; 0 sends it whole, with no deltas).
    offline_stream_chars_per_second: float = Field(default=150.0, ge=0)
    flow_max_parallel: int = 4  # nodes of one flow run executing at once
    # Registers probe tools that tests use to kill workers mid-call; never in production.
    test_tools: bool = False
    sim_speed: float = 1.0  # simulator latency factor (0.05 in tests)

    # Money (cents, EUR): a new account's credit and the default budget settings
    initial_credit_cents: int = 2000
    free_confirm_cents: int = 50  # per paid operation without a question
    daily_free_cents: int = 500  # per UTC day without a question
    # A top-up's bounds; the payment provider is the simulator (`sim_url`) unless set.
    topup_min_cents: int = Field(default=100, ge=1)
    topup_max_cents: int = Field(default=50_000, ge=1)
    payments_url: str | None = None
    # An upstream submit without an answer within this is an unclear outcome
    # (docs/architecture.md#money).
    generation_submit_timeout_seconds: float = 10.0
    # Whether the generation upstream honours `idempotency_key` (a second POST with a key it
    # has seen answers that key's job and creates none; the simulator does, across its
    # restarts). True: an unclear submit (timeout, broken answer, worker killed after the
    # POST) is sent again with the same key and the job adopted. False: it is failed and
    # refunded, never resubmitted (money/orders.py).
    generation_upstream_idempotent: bool = True
    # TEST-ONLY fault hook: the worker exits (os._exit(137)) right after the upstream POST
    # returns, before the job id is persisted. Never set it outside tests.
    fault_kill_after_submit: bool = False
    # TEST-ONLY fault hook: `collect_generation` hangs (heartbeating) before its download,
    # so a test can kill the worker mid-collection. Never set it outside tests.
    fault_hang_in_collect: bool = False
    # TEST-ONLY fault hook: `route_message` hangs (heartbeating) before it routes, so a test
    # can kill the worker mid-routing. Never set it outside tests.
    fault_hang_in_route: bool = False
    # TEST-ONLY fault hook: while this file exists, a starting worker exits at once (code 3),
    # so a test can put `lomo up` into a crash loop. Never set it outside tests.
    fault_worker_exit_file: Path | None = None
    # TEST-ONLY simulated time: a file holding seconds the platform clock (lomo/clock.py)
    # runs ahead of real time; the scenario harness lets days pass with it. Never in
    # production.
    test_clock_file: Path | None = None

    # `lomo up` supervision: a child that dies is restarted after a delay that doubles from
    # `initial` to `max`, and starts again from `initial` once it ran `reset` seconds.
    restart_initial_seconds: float = 0.5
    restart_max_seconds: float = 30.0
    restart_reset_seconds: float = 60.0

    # Observability (docs/operations.md#metrics-and-traces): OTLP/HTTP traces go to this
    # collector when set (off by default); the worker serves Prometheus metrics on this port
    # (0 = off).
    otel_endpoint: str | None = None
    worker_metrics_port: int = 9464

    # Routing
    embedder: Literal["usem", "fake"] = "usem"  # "fake": seeded hash embedder for tests
    routing_active_window: int = 8  # most recently active tasks always shown to the router
    routing_search_limit: int = 6  # extra candidates from keyword + vector search
    routing_duplicate_window: int = 50  # running tasks compared before creating a new one
    # The main thread's memory of the conversation: the router (and main's own answers)
    # read this many latest exchanges (a message and its replies) and the latest work.
    # 0: every message is routed on its own.
    routing_conversation_turns: int = Field(default=6, ge=0, le=50)

    # Memory
    memory_timeout_seconds: float = 2.0  # retrieval bound; past it the step goes on without
    # One call to the memory service (a write job, a vector operation); retrieval is bounded
    # by memory_timeout_seconds on top.
    memory_call_timeout_seconds: float = 60.0
    memory_forget_wait_seconds: float = 20.0  # a card action waits this long for the cascade
    memory_top_k: int = 8  # retrieved memories per context
    memory_profile_items: int = 20  # the profile stays small
    memory_retry_seconds: float = 300.0  # a failed extraction is tried again after this

    # Nudges (nudges/, docs/architecture.md#nudges): the first reminder of a waiting card
    # or finished work after `nudge_base_seconds`; each ignored one doubles the wait, up to
    # `nudge_cap_seconds`, and after `nudge_max` unanswered ones the task stops reminding.
    # While a task of the person runs, their nudge workflow re-reads its tasks every
    # `nudge_check_seconds`; it continues as new after `nudge_rounds` rounds.
    nudge_base_seconds: float = 7200.0
    nudge_cap_seconds: float = 86400.0
    nudge_max: int = 5
    nudge_check_seconds: float = 900.0
    nudge_rounds: int = 100

    # Context: a tool result longer than this (characters of JSON) is stored
    # outside the context; the context shows a preview and a handle for `read_output`.
    tool_output_inline_chars: int = 8000
    tool_output_page_chars: int = 4000  # the largest page `read_output` returns
    context_segment_steps: int = 25  # steps per history segment, summarized once closed
    context_recent_steps: int = 8  # at least this many latest steps stay verbatim
    # Pictures in one context (context/pictures.py): how many, how much base64 in all, and
    # the longest side they are scaled down to.
    context_max_images: int = Field(default=4, ge=0, le=20)
    context_max_image_bytes: int = Field(default=1_500_000, ge=0)
    context_image_max_side: int = Field(default=768, ge=64, le=1568)

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> Settings:
        if self.mode == "production":
            for name in ("admin_token", "callback_secret"):
                if name not in self.model_fields_set:
                    raise ConfigError(f"production mode needs LOMO_{name.upper()}")
                value = getattr(self, name).get_secret_value()
                if (
                    value.lower() in PLACEHOLDER_SECRETS
                    or value in FIXED_SECRETS.values()
                    or len(value) < 16
                ):
                    raise ConfigError(
                        f"LOMO_{name.upper()} is a placeholder or shorter than 16 characters; "
                        "production mode needs a real secret"
                    )
            if not self.database_url:
                raise ConfigError("production mode needs LOMO_DATABASE_URL")
            if not self.allowed_host_names:
                raise ConfigError(
                    "production mode needs LOMO_ALLOWED_HOSTS (the names clients use)"
                )
        return self

    def refuse_fixed_secrets_off_loopback(self) -> None:
        """The stand-in secrets are public: a server reachable from other machines must not
        run with them, in any mode. Called by the commands that bind the api or simulator."""
        if is_loopback(self.host):
            return
        for name, fixed in FIXED_SECRETS.items():
            if getattr(self, name).get_secret_value() == fixed:
                raise ConfigError(
                    f"LOMO_{name.upper()} is the fixed embedded value and LOMO_HOST={self.host} "
                    "is not loopback; set a real secret or bind to 127.0.0.1"
                )

    @property
    def allowed_host_names(self) -> list[str]:
        return [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]

    @property
    def trusted_hosts(self) -> list[str]:
        """Host header names the api and the simulator accept (lomo/hosts.py)."""
        if names := self.allowed_host_names:
            return names
        # The bound address itself too: the default URLs (api_url, sim_url) carry it.
        bound = [self.host] if _is_ip(self.host) else []
        return [*LOOPBACK_NAMES, *bound]

    # Derived values: one place each, so no two copies of a default exist.
    @property
    def resolved_temporal_address(self) -> str:
        return self.temporal_address or f"{self.host}:{self.temporal_port}"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{(self.data_dir / 'lomo.db').resolve()}"

    @property
    def resolved_api_url(self) -> str:
        return self.api_url or f"http://{self.host}:{self.api_port}"

    @property
    def resolved_sim_url(self) -> str:
        return self.sim_url or f"http://{self.host}:{self.sim_port}"

    @property
    def resolved_payments_url(self) -> str:
        return self.payments_url or self.resolved_sim_url

    @property
    def temporal_ui_url(self) -> str:
        return f"http://{self.host}:{self.temporal_ui_port}"

    @property
    def bell_dir(self) -> Path:
        """Where the processes of this data directory wake each other's event streams."""
        return (self.data_dir / "bell").resolve()

    @property
    def resolved_asset_dir(self) -> Path:
        return self.asset_dir or self.data_dir / "assets"

    @property
    def use_anthropic(self) -> bool:
        if self.model_provider == "anthropic":
            return True
        if self.model_provider == "offline":
            return False
        return self.anthropic_api_key is not None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
