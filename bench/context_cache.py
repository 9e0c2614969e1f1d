"""How much of each step's input the prompt cache can serve, over a long task.

    .venv/bin/python bench/context_cache.py [--steps 200] [--min-cache-tokens 1024] [--quiet]

A 200-step task through the real runtime activities and the real `anthropic` SDK against
the Messages-API stand-in (tests/context_support.py): domain tool loading, a 2 MB tool
output paged with read_output, segment summaries, a preference that changes the profile
(twice), a person's edit of the storyboard, a new turn with a message every 8 steps. The
stand-in reports usage as the API does (cache reads at breakpoints or up to 20 blocks
before one; prefixes under --min-cache-tokens are not cached, 1024 as for Sonnet).

Per step: input tokens in all, read from the cache, written to it, the cached share, the
tool block (core tools in the stable prefix, loaded domain tools after the breakpoint) and
why the stable prefix changed. Overall: the cached share of all input tokens, and the tool
block if every tool were visible (before domain loading).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from activities.context import estimate_tokens
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
    if not quiet:
        print("step turn.step  input   read  write  cached  core_tools loaded_tools  changes")
    for n, st in enumerate(rows):
        u = usage_of(st)
        total = sum(u.values())
        totals["in"] += total
        totals["read"] += u["cache_read_input_tokens"]
        totals["write"] += u["cache_creation_input_tokens"]
        p = st.context["prefix"]
        if not quiet:
            print(
                f"{n:4d} {st.turn:4d}.{st.step:<2d} {total:7d} {u['cache_read_input_tokens']:6d} "
                f"{u['cache_creation_input_tokens']:6d} {cached_share(st):7.1%} "
                f"{p['core_tool_tokens']:10d} {p['loaded_tool_tokens']:12d}  "
                + "; ".join(p["changes"])
            )
    share = totals["read"] / totals["in"] if totals["in"] else 0.0
    last = rows[-1].context["prefix"]
    plain = totals["in"] - totals["read"] - totals["write"]
    # Anthropic's prices relative to plain input: cache reads 0.1×, 5-minute writes 1.25×.
    cost = plain + 0.1 * totals["read"] + 1.25 * totals["write"]
    print(
        f"steps {len(rows)}: input {totals['in']} tokens, read from cache {totals['read']}, "
        f"written {totals['write']}; stable-prefix (cached) share overall {share:.1%}; "
        f"cost {cost / 1000:.0f}k plain-input-token equivalents ({cost / totals['in']:.1%} "
        "of uncached)"
    )
    print(
        f"tool block per step: {estimate_tokens(json.dumps(all_tools))} tokens with every "
        f"tool visible (before); {last['core_tool_tokens']} core in the stable prefix + "
        f"{last['loaded_tool_tokens']} loaded after the breakpoint at the end "
        f"(domains {', '.join(last['domains'])})"
    )
    return share


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--min-cache-tokens", type=int, default=1024)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--segment", type=int, default=Settings().context_segment_steps)
    ap.add_argument("--recent", type=int, default=Settings().context_recent_steps)
    a = ap.parse_args()
    asyncio.run(main(a.steps, a.min_cache_tokens, a.quiet, a.segment, a.recent))
