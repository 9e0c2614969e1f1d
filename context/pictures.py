"""Which pictures a step's context shows, and where.

A message's attachments are shown with that message, in the history: later steps repeat
them byte for byte, so the prompt cache keeps them. The results a step should look at
(jobs finished since a step last saw them, or the task's latest result when the person
writes about earlier work without attaching anything) are shown in the dynamic tail,
after the cache point. Which of them are loaded at all, within the per-context bound of
count and bytes, the step decides (`wanted`, most wanted first); a wanted object that was
not loaded is named in words instead.
"""

from __future__ import annotations

from context.types import MsgRow, StepData
from llm.types import Block, ImageBlock, TextBlock
from lomo.states import OrderStatus
from workspace.preview import ATTACHED_LABEL, BEFORE_LABEL, RESULT_LABEL, Preview


def focus(data: StepData) -> list[str]:
    """The results this step should look at (each after the picture it revised, if any)."""
    reported = {o for st in data.steps for o in st.reported_orders or []}
    done = [o for o in data.orders if o.status == OrderStatus.SUCCEEDED and o.object_id]
    fresh = [o for o in done if o.id not in reported]
    if not fresh and done and _about_earlier_work(data):
        fresh = [done[-1]]
    ids = [i for o in fresh for i in (o.reference, o.object_id) if i]
    return list(dict.fromkeys(ids))


def _revised(data: StepData) -> set[str]:
    return {o.reference for o in data.orders if o.reference}


def _about_earlier_work(data: StepData) -> bool:
    """The person wrote this step, and attached nothing: "make it warmer" is about the last
    result."""
    new = [data.messages[m] for m in data.message_ids if m in data.messages]
    return bool(new) and not any(m.attachments for m in new)


def wanted(data: StepData) -> list[str]:
    """Every object this step would show, most wanted first: the focus, then the
    attachments of the messages shown, newest message first."""
    newest = sorted(data.messages.values(), key=lambda m: m.created_at, reverse=True)
    ids = [*focus(data), *(a for m in newest for a in m.attachments)]
    return list(dict.fromkeys(ids))


def blocks(p: Preview, label: str = ATTACHED_LABEL) -> list[Block]:
    """The picture after a line saying what it is (a runtime line: not the person's words)."""
    line = TextBlock(text=f"{label} {p.note}")
    if not p.data:
        return [line]
    return [line, ImageBlock(media_type=p.media_type, data=p.data, ref=p.view())]


def with_attachments(m: MsgRow, data: StepData) -> list[Block]:
    out: list[Block] = [TextBlock(text=m.text)]
    for oid in m.attachments:
        p = data.previews.get(oid)
        out += blocks(p) if p else [TextBlock(text=f"{ATTACHED_LABEL} {oid}, not shown here")]
    return out


def tail_blocks(data: StepData, shown: set[str]) -> list[Block]:
    """The focus pictures not already in the history, each with what it is."""
    out: list[Block] = []
    revised = _revised(data)
    for oid in focus(data):
        p = data.previews.get(oid)
        if p is not None and oid not in shown:
            out += blocks(p, BEFORE_LABEL if oid in revised else RESULT_LABEL)
    return out


def shown_images(bs: list[Block]) -> list[dict[str, object]]:
    return [b.ref for b in bs if isinstance(b, ImageBlock)]
