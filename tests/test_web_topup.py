"""Adding credit in the app, in a real Chromium against a real `lomo up` (the simulator
plays the payment provider and completes the payment by itself): at 360 px, by keyboard
only, the payment's status and then the new balance are shown; axe-core finds nothing
serious or critical on the open form or on the result."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import playwright.sync_api as sync_api
import pytest

from tests.test_web_reach import _fits
from tests.up_support import running_up, up_env
from tests.web_support import api_client, audit, browser_page, open_app

pytestmark = pytest.mark.slow
expect = sync_api.expect


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_up(tmp_path_factory.mktemp("web-topup") / "data", up_env()) as st:
        yield st


def _serious(report: dict[str, Any]) -> list[Any]:
    return [v for v in report["violations"] if v["impact"] in ("serious", "critical")]


def test_add_credit_by_keyboard_at_360_px(browser: Any, stack: dict[str, Any]) -> None:
    with api_client(stack) as api:
        before = api.get("/v1/budget").json()["balance"]
    with browser_page(browser, "topup-360", width=360, axe=True) as w:
        page = w.page
        open_app(page, stack)
        balance = page.locator(".budget [data-field=balance]")
        expect(balance).to_have_text(f"€{before / 100:.2f}")
        toggle = page.get_by_role("button", name="Add credit")
        toggle.focus()
        page.keyboard.press("Enter")
        expect(toggle).to_have_attribute("aria-expanded", "true")
        amount = page.get_by_role("spinbutton", name="Amount (EUR)")
        expect(amount).to_be_focused()
        _fits(page, 360)
        w.screenshot("form")
        assert _serious(audit(page, "topup-form-360")) == []
        amount.fill("7")
        page.keyboard.press("Enter")
        status = page.locator(".topup-status")
        after = before + 700
        expect(status).to_have_attribute("data-status", "succeeded", timeout=30_000)
        expect(status).to_have_text(f"Credit added: €7.00. Balance: €{after / 100:.2f}.")
        expect(balance).to_have_text(f"€{after / 100:.2f}")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        _fits(page, 360)
        w.screenshot("credited")
        assert _serious(audit(page, "topup-done-360")) == []
    with api_client(stack) as api:
        budget = api.get("/v1/budget").json()
    assert (budget["balance"], budget["deposits"]) == (after, before + 700)
