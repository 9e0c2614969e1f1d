"""The stable prefix between steps: what repeats the previous step's bytes (what a prompt
cache can serve), why the bytes before the history changed, and the profile laid out as a
snapshot plus appended additions. Only hashes of earlier steps are kept here, never their
words."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from context.types import Profile


def sha(parts: list[Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def compare_prefix(
    now: dict[str, Any],
    prev: dict[str, Any] | None,
    history: list[dict[str, Any]],
    appended: str | None,
) -> dict[str, Any]:
    """Which layers repeat the previous step's bytes (what the prompt cache can serve), and
    why the stable prefix changed. Sets now["changes"] (reasons the bytes before the
    history changed; empty: unchanged) and now["events"] (what was appended or dropped
    without touching them: domain and guide loads and unloads, profile additions)."""
    now["changes"] = []
    now["events"] = []
    if prev is None:
        return dict.fromkeys(
            (
                "stable_prefix",
                "loaded_tools",
                "segment_summaries",
                "recent_messages",
                "dynamic_tail",
            ),
            False,
        )
    before = prev.get("domains", [])
    added = [d for d in now["domains"] if d not in before]
    dropped = [d for d in before if d not in now["domains"]]
    if added:
        now["events"].append("domain load: " + ", ".join(added))
    if dropped:
        now["events"].append("domain unload: " + ", ".join(dropped))
    had = prev.get("guides", [])
    loaded = [g for g in now.get("guides", []) if g not in had]
    unloaded = [g for g in had if g not in now.get("guides", [])]
    if loaded:
        now["events"].append("guide load: " + ", ".join(loaded))
    if unloaded:
        now["events"].append("guide unload: " + ", ".join(unloaded))
    if appended:
        now["events"].append(appended)
    if now["core_sha"] != prev.get("core_sha"):
        now["changes"].append("tool definitions changed (a new worker version)")
    if now["stable_sha"] != prev.get("stable_sha"):
        if now["profile_version"] != prev.get("profile_version") and not appended:
            now["changes"].append(
                f"profile v{prev.get('profile_version')} → v{now['profile_version']}"
            )
        if now["task_sha"] != prev.get("task_sha"):
            # Forgetting scrubbed the goal or briefing (or a step before the header existed).
            now["changes"].append("task header changed (goal, briefing or language)")
        if not now["changes"]:
            now["changes"].append("unexplained")
    stable = now["stable_sha"] == prev.get("stable_sha")
    summaries = stable and now["summaries_sha"] == prev.get("summaries_sha")
    k = int(prev.get("history_blocks", 0))
    repeated = stable and k > 0 and sha(history[:k]) == prev.get("history_sha")
    return {
        "stable_prefix": now["core_sha"] == prev.get("core_sha") and stable,
        "loaded_tools": bool(now["domains"]) and (repeated or summaries),
        "segment_summaries": summaries,
        # The history up to the previous step is read; what this step added is written.
        "recent_messages": "partly" if repeated else False,
        "dynamic_tail": False,
    }


@dataclass
class ProfileLayout:
    state: dict[str, Any]
    base_text: str  # the snapshot in the system prompt
    notes: list[tuple[int, str]]  # (step ordinal, text): additions appended in the history
    appended: str | None  # this step's addition, if any


def line_sha(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:12]


def profile_layout(prev: dict[str, Any] | None, profile: Profile, n: int) -> ProfileLayout:
    """The profile as a snapshot plus appended additions. A new version that only adds lines
    is appended to the history at the step it appeared (the snapshot and everything after
    it stay byte-identical); one that removes or changes a line (a correction, forgetting)
    replaces the snapshot at once, so nothing stale stays in the context. Only line hashes
    are kept between steps, never the profile's words."""
    lines = profile.text.split("\n") if profile.text else []
    header, items = (lines[0], lines[1:]) if lines else ("", [])
    by_sha = {line_sha(i): i for i in items}
    state = (prev or {}).get("profile_state")
    appended = None
    if state is not None:
        known = set(state["base"]) | {h for note in state["notes"] for h in note["lines"]}
        if not known <= set(by_sha):
            state = None  # a line went away or changed: the snapshot is rewritten
        elif state["version"] != profile.version:
            new = [h for h in by_sha if h not in known]
            notes = state["notes"] + (
                [{"at": n, "version": profile.version, "lines": new}] if new else []
            )
            state = {**state, "version": profile.version, "notes": notes}
            appended = (
                f"profile v{state['base_version']} + additions → v{profile.version} (appended)"
            )
    if state is None:
        v = profile.version
        state = {
            "version": v,
            "base_version": v,
            "header": header,
            "base": list(by_sha),
            "notes": [],
        }
    base = [by_sha[h] for h in state["base"]]
    base_text = state["header"] + "\n" + "\n".join(base) if base else ""
    notes = [
        (
            int(note["at"]),
            f"[runtime] the person's profile changed (v{note['version']}); it now also says:\n"
            + "\n".join(by_sha[h] for h in note["lines"]),
        )
        for note in state["notes"]
    ]
    return ProfileLayout(state, base_text, notes, appended)
