"""How much of each step's input the prompt cache can serve, over a long task.

    .venv/bin/python bench/context_cache.py [--steps 200] [--min-cache-tokens 1024] [--quiet]

A 200-step task through the real runtime activities and the real `anthropic` SDK against
the Messages-API stand-in (tests/context_support.py): domain tool loading, a 2 MB tool
output paged with read_output, segment summaries, a preference that changes the profile
(twice), a person's edit of the storyboard, a new turn with a message every 8 steps. The
stand-in reports usage as the API does (at most four breakpoints, cache reads at
breakpoints or up to 20 blocks before one, deferred tools only where referenced; prefixes
under --min-cache-tokens are not cached, 1024 as for Sonnet).

Per step: input tokens in all, read from the cache, written to it, the cached share, the
tool block (core tools in the stable prefix; the loaded domains' definitions, which a load
appends to the history and a segment close drops when unused) and what changed: a prefix
rewrite with its reason, or what was appended (domain load, profile addition), a domain
unload, a segment close. Overall: the cached share of all input tokens, what was not read
by cause, and the tool block if every tool were visible (before domain loading).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from context.build import estimate_tokens
from context.segments import ContextPolicy
from lomo.db.migrate import upgrade
from lomo.settings import Settings
from tests.context_support import Policy, cached_share, context_run, usage_of

TURN = 8
EXPORT_AT = (30, 120)
MEMORY_AT = 60
EDIT_AT = 90
PREFERENCES = {100: "Our brand's main colour is teal.", 150: "Our brand's font is Futura."}


async def main(steps: int, min_cache_tokens: int, quiet: bool, segment: int, recent: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'lomo.db'}"
        upgrade(url)
        policy = Policy(TURN, 4000, MEMORY_AT, EXPORT_AT)
        async with context_run(
            url,
            Path(tmp),
            policy,
            min_cache_tokens,
            context_segment_steps=segment,
            context_recent_steps=recent,
        ) as run:
            for n in range(steps):
                if n == EDIT_AT:
                    await run.person_edits()
                said = [PREFERENCES[n]] if n in PREFERENCES else None
                await run.step(n, said)
            rows = await run.steps()
            all_tools = [
                {
                    "name": t.spec.name,
                    "description": t.spec.description,
                    "input_schema": t.spec.input_schema,
                }
                for t in run.runtime.tools.values()
            ]
    totals = {"in": 0, "read": 0, "write": 0}
    segments = ContextPolicy(segment, recent)
    causes: dict[str, list[int]] = {}  # cause -> [steps, input, not read]
    if not quiet:
        print("step turn.step  input   read  write  cached  core_tools loaded_tools  changes")
    for n, st in enumerate(rows):
        u = usage_of(st)
        total = sum(u.values())
        totals["in"] += total
        totals["read"] += u["cache_read_input_tokens"]
        totals["write"] += u["cache_creation_input_tokens"]
        p = st.context["prefix"]
        notes = [*p["changes"], *p.get("events", [])]
        closes = n > 0 and segments.closed(n) > segments.closed(n - 1)
        if closes:
            notes.append(f"segment {segments.closed(n) - 1} closed")
        cause = _cause(n, p, closes)
        c = causes.setdefault(cause, [0, 0, 0])
        c[0], c[1], c[2] = c[0] + 1, c[1] + total, c[2] + total - u["cache_read_input_tokens"]
        if not quiet:
            print(
                f"{n:4d} {st.turn:4d}.{st.step:<2d} {total:7d} {u['cache_read_input_tokens']:6d} "
                f"{u['cache_creation_input_tokens']:6d} {cached_share(st):7.1%} "
                f"{p['core_tool_tokens']:10d} {p['loaded_tool_tokens']:12d}  " + "; ".join(notes)
            )
    share = totals["read"] / totals["in"] if totals["in"] else 0.0
    plain = totals["in"] - totals["read"] - totals["write"]
    # Anthropic's prices relative to plain input: cache reads 0.1×, 5-minute writes 1.25×.
    cost = plain + 0.1 * totals["read"] + 1.25 * totals["write"]
    print(
        f"steps {len(rows)} (segments of {segment}, {recent} recent): input {totals['in']} "
        f"tokens, read from cache {totals['read']}, written {totals['write']}; stable-prefix "
        f"(cached) share overall {share:.1%}; cost {cost / 1000:.0f}k plain-input-token "
        f"equivalents ({cost / totals['in']:.1%} of uncached)"
    )
    print("input not read from the cache, by the step's cause (share of all input):")
    for cause, (k, inp, lost) in sorted(causes.items(), key=lambda kv: -kv[1][2]):
        print(
            f"  {cause:<40s} {k:3d} steps  {lost:6d} tokens ({lost / totals['in']:.2%}); "
            f"those steps {1 - lost / inp:.1%} cached"
        )
    loaded = [st.context["prefix"]["loaded_tool_tokens"] for st in rows]
    core = rows[-1].context["prefix"]["core_tool_tokens"]
    every = estimate_tokens(json.dumps(all_tools))
    print(
        f"tool block per step: before (every tool visible) {every} tokens in every step; now "
        f"{core} core tokens in the stable prefix + the loaded domains' definitions in the "
        f"history: mean {sum(loaded) / len(loaded):.0f}, max {max(loaded)}, "
        f"{sum(1 for x in loaded if x)} of {len(loaded)} steps with a domain loaded, "
        f"{loaded[-1]} at the end (unloaded at a segment close when unused)"
    )
    return share


def _cause(n: int, prefix: dict[str, Any], closes: bool) -> str:
    events = [str(e) for e in prefix.get("events", [])]
    changes = [str(c) for c in prefix.get("changes", [])]
    if n == 0:
        return "first step (all new)"
    if changes:
        return "prefix rewritten (" + changes[0].split(" ")[0] + ")"
    if closes:
        return "segment close" + (" + domain unload" if any("unload" in e for e in events) else "")
    if any(e.startswith("domain load") for e in events):
        return "domain load"
    if any(e.startswith("profile") for e in events):
        return "profile addition"
    return "other (the step's own additions, tail)"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--min-cache-tokens", type=int, default=1024)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--segment", type=int, default=Settings().context_segment_steps)
    ap.add_argument("--recent", type=int, default=Settings().context_recent_steps)
    a = ap.parse_args()
    asyncio.run(main(a.steps, a.min_cache_tokens, a.quiet, a.segment, a.recent))
