"""Every `ApplicationError` raised in the worker's code names its `type`, so a workflow, the
api and an operator can tell the failures apart without parsing their messages."""

from __future__ import annotations

import ast

from tests.source_scan import sources

PACKAGES = ("activities", "tools", "journal", "context", "workflows")


def untyped_errors(source: str, name: str = "<source>") -> list[str]:
    """`file:line` of each `ApplicationError(...)` call in `source` without `type=`."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called == "ApplicationError" and not any(k.arg == "type" for k in node.keywords):
            found.append(f"{name}:{node.lineno}")
    return found


def test_the_detector_finds_an_error_without_a_type() -> None:
    source = (
        "raise ApplicationError('gone', non_retryable=True)\n"
        "raise exceptions.ApplicationError('gone', type='NotFound')\n"
    )
    assert untyped_errors(source) == ["<source>:1"]


def test_every_application_error_carries_a_type() -> None:
    missing = [hit for name, text in sources(*PACKAGES) for hit in untyped_errors(text, name)]
    assert not missing, "ApplicationError without type=: " + ", ".join(missing)
