"""Creative guides on demand (docs/architecture.md#context): know-how for briefing and
prompting each medium, with the limits of the platform's models, loaded into a task's
history only when its work needs it instead of living in the system rules.

Each guide is a Markdown file beside this module with a small header: `name`, `when` (the
line the system text lists it by), `loads_with` (tool domains whose load brings it along)
and `kept_by` (tool domains whose use keeps it loaded over a segment close). The catalogue
is package data, read once; the functions here are pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Guide:
    name: str
    when: str
    loads_with: tuple[str, ...]
    kept_by: tuple[str, ...]
    text: str


def parse_guide(source: str) -> Guide:
    """A guide file: a `---` header of `key: value` lines, then the text."""
    _, header, text = source.split("---\n", 2)
    fields: dict[str, str] = {}
    for line in header.strip().splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()

    def names(key: str) -> tuple[str, ...]:
        return tuple(n.strip() for n in fields.get(key, "").split(",") if n.strip())

    return Guide(
        fields["name"], fields["when"], names("loads_with"), names("kept_by"), text.strip()
    )


def _read_catalogue() -> dict[str, Guide]:
    files = sorted(
        (f for f in resources.files(__name__).iterdir() if f.name.endswith(".md")),
        key=lambda f: f.name,
    )
    guides = [parse_guide(f.read_text(encoding="utf-8")) for f in files]
    return {g.name: g for g in guides}


GUIDES: dict[str, Guide] = _read_catalogue()


def guides_text(guides: dict[str, Guide]) -> str:
    """The stable prefix's list of guides: a name and when to load it, never the text."""
    lines = [f"- {g.name}: {g.when}" for g in guides.values()]
    return (
        "Creative guides (how to brief and prompt each medium, and the models' limits), "
        "available with load_guide(name); read the matching one before planning paid work:\n"
        + "\n".join(lines)
    )


def guide_block(guide: Guide) -> str:
    """How the runtime shows a guide it loads itself (with a domain, or over a close)."""
    return f"[runtime] guide {guide.name} (loaded):\n{guide.text}"


def with_domains(guides: dict[str, Guide], domains: Iterable[str]) -> list[str]:
    """The guides a load of `domains` brings along, in catalogue order."""
    wanted = set(domains)
    return [g.name for g in guides.values() if wanted & set(g.loads_with)]


def carried_guides(
    guides: dict[str, Guide], read: Iterable[str], before: Iterable[str], domains: Iterable[str]
) -> list[str]:
    """The guides kept over a segment close: those loaded in the window (`read`), those the
    carried `domains` bring along, and those loaded `before` the close whose work goes on
    (one of their `kept_by` domains is carried). The rest are unloaded."""
    used, kept = set(domains), set(read)
    kept.update(with_domains(guides, used))
    kept.update(n for n in before if n in guides and used & set(guides[n].kept_by))
    return [n for n in guides if n in kept]
