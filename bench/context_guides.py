"""The prompt cache with creative guides loaded, against the same task without them.

    .venv/bin/python bench/context_guides.py [--steps 120] [--min-cache-tokens 1024]

The scripted poster task of tests/test_context_guides.py (it loads the poster-series guide,
the image tools with their guide, and the storyboard guide, then works with image tools
only, so a segment close drops the storyboard guide), run through the real runtime
activities and the real `anthropic` SDK against the Messages-API stand-in, once as it is
and once with `load_guide` removed (no guides listed, none loaded). Prints the share of all
input tokens read from the cache for both, and the guides' sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from context.build import estimate_tokens
from context.guides import GUIDES
from llm.types import ModelRequest, ModelResponse
from lomo.db.migrate import upgrade
from tests.context_support import _use, context_run, usage_of
from tests.test_context_guides import GuidePolicy


class WithoutGuides(GuidePolicy):
    """The same task, with a listing instead of each guide load."""

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        out = await super().__call__(request)
        if out.tool_uses and out.tool_uses[0].name == "load_guide":
            return _use(len(self.requests) - 1, "list_objects", {})
        return out


async def run(guides: bool, steps: int, min_cache_tokens: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lomo-guides-"))
    url = f"sqlite+aiosqlite:///{tmp / 'lomo.db'}"
    upgrade(url)
    policy = GuidePolicy(6) if guides else WithoutGuides(6)
    async with context_run(url, tmp, policy, min_cache_tokens) as r:  # type: ignore[arg-type]
        if not guides:
            r.runtime.tools.pop("load_guide")
        for n in range(steps):
            await r.step(n)
        rows = await r.steps()
    usage = [usage_of(st) for st in rows]
    total = sum(sum(u.values()) for u in usage)
    read = sum(u["cache_read_input_tokens"] for u in usage)
    last = rows[-1].context["prefix"]
    print(
        f"{'with' if guides else 'without'} guides, {steps} steps: {read / total:.1%} of "
        f"{total} input tokens read from the cache; loaded at the end: "
        f"{last.get('guides') or 'none'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--min-cache-tokens", type=int, default=1024)
    a = ap.parse_args()
    print("guides: " + ", ".join(f"{g.name} {estimate_tokens(g.text)}" for g in GUIDES.values()))
    asyncio.run(run(True, a.steps, a.min_cache_tokens))
    asyncio.run(run(False, a.steps, a.min_cache_tokens))


if __name__ == "__main__":
    main()
