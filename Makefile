# Two commands matter: `make up` (run the embedded platform) and `make test` (what CI runs).
PY      := .venv/bin/python
UV      := .venv/bin/uv
STAMP   := .venv/.synced
# Tests wait on Temporal, HTTP and subprocesses far more than on CPU: run them side by side.
PYTEST_WORKERS ?= 3

.PHONY: install browser agui-client axe web-vendor up test lint typecheck pytest scenarios intents-eval plans-eval clean

$(PY):
	python3 -m venv .venv
	.venv/bin/pip install -q "uv>=0.5,<1"

$(STAMP): $(PY) uv.lock pyproject.toml
	$(UV) sync --frozen --all-groups -q
	touch $(STAMP)

install: $(STAMP)

# The web app's browser tests drive Debian's Chromium (Playwright's own download cannot
# reach its CDN here); installed once, a no-op when it is there.
browser:
	@test -x /usr/bin/chromium || { apt-get update -q && apt-get install -y -q chromium; }

# The official AG-UI client from npm, for the AG-UI endpoint's tests (pinned in its lock).
AGUI_CLIENT := tests/agui_client/node_modules/.package-lock.json
$(AGUI_CLIENT): tests/agui_client/package-lock.json
	cd tests/agui_client && npm ci --no-audit --no-fund --loglevel=error
agui-client: $(AGUI_CLIENT)

# axe-core from npm, injected into the web app's pages by its accessibility tests (pinned).
AXE := tests/axe/node_modules/.package-lock.json
$(AXE): tests/axe/package-lock.json
	cd tests/axe && npm ci --no-audit --no-fund --loglevel=error
axe: $(AXE)

# three.js from npm, served by the api to the web app for 3D previews (pinned in its lock).
WEB_VENDOR := web/node_modules/.package-lock.json
$(WEB_VENDOR): web/package-lock.json
	cd web && npm ci --no-audit --no-fund --loglevel=error
web-vendor: $(WEB_VENDOR)

up: install web-vendor
	.venv/bin/lomo up

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports --no-cache

typecheck: install
	.venv/bin/mypy lomo llm vectors cards tasks checklist money routing memory workspace flows nudges tools context journal standin workflows activities api cli sim web scenarios

pytest: install browser agui-client axe web-vendor
	OPENBLAS_NUM_THREADS=1 .venv/bin/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --durations=30 $(PYTEST_ARGS)

test: lint typecheck pytest

# The simulated person's whole stories on a fresh embedded stack (figures table; exit 1 on
# any regression). SCENARIO_ARGS=--faults mixes in faults; --postgres a private cluster.
scenarios: install
	.venv/bin/lomo scenarios $(SCENARIO_ARGS)

# The offline model's intent recognition on the held-out requests, per intent and language.
intents-eval: install
	OPENBLAS_NUM_THREADS=1 .venv/bin/python -m standin.eval tests/data/heldout_intents_v2.jsonl \
		tests/data/heldout_intents_v3.jsonl

# Multi-part requests driven through a fresh embedded stack (price confirmed, first draft
# picked) and the finished tasks judged against what each names; exit 1 under 95 %.
plans-eval: install web-vendor
	OPENBLAS_NUM_THREADS=1 .venv/bin/python -m scenarios.plans_eval \
		tests/data/heldout_plans_v1.jsonl tests/data/heldout_plans_v2.jsonl $(PLANS_ARGS)

clean:
	rm -rf .venv .lomo .mypy_cache .ruff_cache
