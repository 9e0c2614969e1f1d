"""Lomo's data converter decodes exactly what the SDK's default one decodes (lomo/payloads.py)."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.converter import DataConverter

import activities.flow_types
import activities.types
import workflows.types
from lomo.payloads import DATA_CONVERTER

FAST = DATA_CONVERTER.payload_converter
STOCK = DataConverter.default.payload_converter


def sample(hint: Any, depth: int = 0) -> Any:
    """A value of `hint` with every optional part filled (so nested decoding is exercised)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in typing.get_args(hint) if a is not type(None)), depth)
    if origin is list:
        return [sample(typing.get_args(hint)[0], depth + 1) for _ in range(2)]
    if origin is dict:
        return {"k": sample(typing.get_args(hint)[1], depth + 1)}
    if origin is tuple:
        return tuple(sample(a, depth + 1) for a in typing.get_args(hint) if a is not Ellipsis)
    if dataclasses.is_dataclass(hint):
        assert isinstance(hint, type)
        hints = typing.get_type_hints(hint)
        kw = {f.name: sample(hints[f.name], depth + 1) for f in dataclasses.fields(hint) if f.init}
        return hint(**kw)
    if hint is Any:
        return {"any": [1, "two"]}
    if hint is datetime:
        return datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    return {str: f"s{depth}", int: 3 + depth, float: 1.5, bool: True}[hint]


def workflow_dataclasses() -> list[type]:
    found = []
    for module in (activities.types, activities.flow_types, workflows.types):
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__:
                found.append(obj)
    return found


@pytest.mark.parametrize("cls", workflow_dataclasses(), ids=lambda c: c.__name__)
def test_every_workflow_dataclass_decodes_as_the_sdk_does(cls: type) -> None:
    value = sample(cls)
    for written_by in (FAST, STOCK):
        payloads = written_by.to_payloads([value])
        fast = FAST.from_payloads(payloads, [cls])[0]
        stock = STOCK.from_payloads(payloads, [cls])[0]
        assert fast == stock == value
        assert type(fast) is cls


@dataclass
class Inner:
    name: str
    when: datetime | None = None


@dataclass
class Outer:
    items: list[Inner]
    extra: Inner | None = None
    count: int = 0
    derived: str = field(default="", init=False)


def test_unknown_keys_are_ignored_and_defaults_fill_missing_ones() -> None:
    [p] = STOCK.to_payloads([{"items": [{"name": "a", "later_field": 1}], "gone": True}])
    got = FAST.from_payloads([p], [Outer])[0]
    assert got == Outer([Inner("a")])


def test_init_false_fields_are_restored() -> None:
    value = Outer([Inner("a", datetime(2026, 1, 1, tzinfo=UTC))], Inner("b"), 2)
    value.derived = "kept"
    got = FAST.from_payloads(FAST.to_payloads([value]), [Outer])[0]
    assert got.derived == "kept"
    assert got == value


def test_a_missing_required_field_raises() -> None:
    [p] = STOCK.to_payloads([{"count": 1}])
    with pytest.raises(TypeError):
        FAST.from_payloads([p], [Outer])


def test_a_wrong_field_type_names_the_field_as_the_sdk_does() -> None:
    [p] = STOCK.to_payloads([{"items": [{"name": 5}]}])
    messages = []
    for conv in (FAST, STOCK):
        with pytest.raises(TypeError, match="field items") as got:
            conv.from_payloads([p], [Outer])
        chain, err = [], got.value
        while err is not None:
            chain.append(str(err))
            err = err.__cause__  # type: ignore[assignment]
        messages.append(chain)
    assert any("field name" in m for m in messages[0])
    assert messages[0] == messages[1]
