"""Playwright in Debian's Chromium against a real `lomo up`: the browser, a page that
fails the test on any console error or page error (unless the test names that network
status as expected), numbered screenshots in test-artifacts/web/, and axe-core audits."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "web"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# axe-core from npm (tests/axe, installed by `make pytest`), never from a CDN.
AXE = ROOT / "tests" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
IMPACTS = ("minor", "moderate", "serious", "critical")
# Chromium reports a fetch that got an error status as a console error; a test names the
# statuses it provokes on purpose (a 409 conflict, a 413 upload, the api being away).
_NETWORK = re.compile(r"status of (\d{3})|net::(ERR_[A-Z_]+)")


def require_browser() -> str:
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium")
    pytest.skip("Chromium is not installed (make test installs it)")


class PageWatch:
    """Console errors and page errors seen by one page."""

    def __init__(self, page: Any, name: str) -> None:
        self.page, self.name = page, name
        self.errors: list[str] = []
        self.allowed: set[str] = set()
        self.shot = 0
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def _console(self, msg: Any) -> None:
        if msg.type != "error":
            return
        m = _NETWORK.search(msg.text)
        if m and (m.group(1) or m.group(2)) in self.allowed:
            return
        self.errors.append(f"console: {msg.text}")

    def screenshot(self, step: str) -> Path:
        self.shot += 1
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{self.name}-{self.shot:02d}-{step}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def assert_clean(self) -> None:
        assert not self.errors, "\n".join(self.errors)


def require_axe() -> Path:
    if AXE.exists():
        return AXE
    pytest.fail(f"no axe-core at {AXE}: `make pytest` installs it (make axe)")


def audit(page: Any, screen: str) -> dict[str, Any]:
    """An axe-core audit of what the page shows now: violations counted by impact, and
    each serious or critical one named with its elements; kept in test-artifacts/web/."""
    # A function, not an expression: the page's CSP forbids eval().
    result = page.evaluate(
        "async () => { const r = await axe.run(document, { resultTypes: ['violations'] });"
        " return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.map((n) => n.target.join(' ')) })); }"
    )
    counts = {impact: sum(1 for v in result if v["impact"] == impact) for impact in IMPACTS}
    report = {"screen": screen, "counts": counts, "violations": result}
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / f"axe-{screen}.json").write_text(json.dumps(report, indent=2))
    return report


@contextmanager
def browser_page(
    browser: Any, name: str, locale: str = "en-US", width: int = 1400, axe: bool = False
) -> Iterator[PageWatch]:
    context = browser.new_context(locale=locale, viewport={"width": width, "height": 1000})
    if axe:
        # An init script comes through the browser's protocol, so the page's strict CSP
        # stays as it is (a <script> tag with axe's text inline would be refused by it).
        context.add_init_script(path=str(require_axe()))
    page = context.new_page()
    watch = PageWatch(page, name)
    try:
        yield watch
    finally:
        context.close()
    watch.assert_clean()


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, driven by Playwright (one per test module)."""
    from playwright import sync_api

    path = require_browser()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def api_client(st: dict[str, Any]) -> httpx.Client:
    """The demo person's api client for a stack `lomo up` started."""
    auth = {"Authorization": f"Bearer {st['demo_token']}"}
    return httpx.Client(base_url=st["api_url"], headers=auth, timeout=30)


def open_app(page: Any, st: dict[str, Any]) -> None:
    """The app, signed in through the address fragment, its entry box ready."""
    from playwright.sync_api import expect

    page.goto(f"{st['app_url']}#token={st['demo_token']}")
    expect(page.locator("form.entry textarea")).to_be_visible()
