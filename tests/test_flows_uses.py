"""Re-make only what a change touches, as pure functions: a document read as named parts,
a node's use of it narrowed to the parts its params name, hashes over the used parts only,
and the price card that lists what is made again and why."""

from __future__ import annotations

from typing import Any

from flows.graph import descendants, edges_of, node_hashes, price_plan
from flows.remake import price_card, reasons
from flows.uses import Ref, context_of, document_groups, document_parts, references, used_of
from tests.flow_support import storyboard, storyboard_flow

DOC = {"text": storyboard()}
CHANGED = {"text": storyboard(mara="a fisherwoman in a green coat, her braid cut short")}
NODES: dict[str, Any] = storyboard_flow("obj_board")["nodes"]
PAID = {n for n, node in NODES.items() if node["type"] != "document"}


def _leaf(content: dict[str, Any]) -> dict[str, str]:
    return {"storyboard": f"obj_board@{content['text']}"}


def test_a_document_reads_as_named_entities_with_attributes() -> None:
    parts = document_parts(DOC)
    assert parts["Mara"] == {
        "description": "a fisherwoman in a yellow raincoat, grey braid",
        "voice": "low and calm",
    }
    assert parts["The lighthouse"] == {"description": "a white tower with a black lantern room"}
    assert parts["Characters"] == {}  # a heading over others names a group of them
    assert document_groups(DOC) == {"Characters": ["Mara", "Tom"], "Places": ["The lighthouse"]}
    free = document_parts({"text": "# Ada\nShe codes at night. Tea: always.\nage: 36"})
    # A sentence with a colon in it stays free text; a short label before one is a key.
    assert free["Ada"] == {"text": "She codes at night. Tea: always.", "age": "36"}
    structured = document_parts({"text": "", "entities": {"Ada": {"age": 36}, "Bo": "a dog"}})
    assert structured == {"Ada": {"age": "36"}, "Bo": {"text": "a dog"}}
    assert document_parts(None) == {} and document_parts({"text": "no headings"}) == {}


def test_a_node_uses_the_entities_its_params_name() -> None:
    names = list(document_parts(DOC))
    assert references({"prompt": "Mara and Tom mend a net"}, names) == [Ref("Mara"), Ref("Tom")]
    assert references({"prompt": "TOMAS waves"}, names) is None  # a whole word, not a prefix
    assert references({"prompt": "gulls over the harbour"}, names) is None
    explicit = {"prompt": "a face in the rain", "uses": ["Mara.voice", "The lighthouse"]}
    assert references(explicit, names) == [Ref("Mara", "voice"), Ref("The lighthouse")]
    assert references({"prompt": "Mara", "uses": []}, names) == []  # uses nothing of it


def test_a_changed_character_changes_exactly_the_shots_that_show_her_and_the_edit() -> None:
    before = node_hashes(NODES, _leaf(DOC), {"storyboard": DOC})
    after = node_hashes(NODES, _leaf(CHANGED), {"storyboard": CHANGED})
    changed = {n for n in NODES if before[n] != after[n]}
    assert changed == {"storyboard", "shot2", "shot4", "edit"}
    # Without narrowing every shot, and so everything, would be made again.
    assert descendants(edges_of(NODES), ["storyboard"]) == PAID


def test_an_attribute_use_ignores_the_other_attributes() -> None:
    voice = {**NODES["shot2"], "params": {"prompt": "a voice over", "uses": ["Mara.voice"]}}
    nodes = {**NODES, "shot2": voice}
    before = node_hashes(nodes, _leaf(DOC), {"storyboard": DOC})
    after = node_hashes(nodes, _leaf(CHANGED), {"storyboard": CHANGED})
    assert before["shot2"] == after["shot2"] and before["shot4"] != after["shot4"]
    # Naming a character the document lacks: adding her later is a change.
    ghost = {**NODES["shot2"], "params": {"prompt": "x", "uses": ["Ines"]}}
    added = {"text": storyboard() + "## Ines\ndescription: a painter\n"}
    nodes = {**NODES, "shot2": ghost}
    h1 = node_hashes(nodes, _leaf(DOC), {"storyboard": DOC})["shot2"]
    assert h1 != node_hashes(nodes, _leaf(added), {"storyboard": added})["shot2"]


def test_a_node_that_names_nothing_uses_the_whole_document_with_its_old_hash() -> None:
    music = {"type": "audio", "params": {"prompt": "a calm score"}, "inputs": ["storyboard"]}
    nodes = {**NODES, "music": music}
    narrowed = node_hashes(nodes, _leaf(DOC), {"storyboard": DOC})
    # The hash it had before narrowing existed: its stored results stay valid.
    assert narrowed["music"] == node_hashes(nodes, _leaf(DOC))["music"]
    assert narrowed["music"] != node_hashes(nodes, _leaf(CHANGED), {"storyboard": CHANGED})["music"]
    assert used_of(music["params"], None) == {"missing": True}


def test_naming_a_group_uses_every_entity_under_it() -> None:
    crowd = {**NODES["shot1"], "params": {"prompt": "all the characters wave"}}
    nodes = {**NODES, "shot1": crowd}
    before = node_hashes(nodes, _leaf(DOC), {"storyboard": DOC})
    after = node_hashes(nodes, _leaf(CHANGED), {"storyboard": CHANGED})
    assert before["shot1"] != after["shot1"]
    assert "Mara.voice" in used_of(crowd["params"], DOC)["parts"]
    assert "The lighthouse.description" not in used_of(crowd["params"], DOC)["parts"]


def test_the_request_carries_exactly_the_used_parts() -> None:
    used = used_of(NODES["shot4"]["params"], DOC)
    assert context_of([used]) == (
        "Mara, description: a fisherwoman in a yellow raincoat, grey braid\n"
        "Mara, voice: low and calm\n"
        "Tom, description: a boy of ten with a red scarf"
    )


def _remake_card(language: str) -> tuple[str, dict[str, Any]]:
    """The first plan made everything; the second, after Mara changed, re-makes two."""
    first = price_plan(NODES, _leaf(DOC), lambda n, h: False, _price, {"storyboard": DOC})
    made = {(n, h) for n, h in first.hashes.items()}
    plan = price_plan(
        NODES, _leaf(CHANGED), lambda n, h: (n, h) in made, _price, {"storyboard": CHANGED}
    )
    assert plan.must_run == ["storyboard", "shot2", "shot4", "edit"]
    assert plan.reuse == ["shot1", "shot3", "shot5"] and plan.total_cents == 2 * 4 + 40
    return price_card(plan, reasons(plan, first.bases, PAID), PAID, language)


def _price(node_id: str, node: Any) -> int:
    return 40 if node["type"] == "edit" else 4


def test_the_card_lists_what_is_made_again_and_why_in_english_and_german() -> None:
    title, payload = _remake_card("en")
    assert title == (
        "Re-make 3 of 6 paid nodes for 0.48 EUR in total; 3 kept as they are. "
        "shot2 and shot4 show Mara, whose description changed. "
        "edit uses the re-made shot2 and shot4."
    )
    assert [(r["node"], r["price_cents"]) for r in payload["remake"]] == [
        ("shot2", 4),
        ("shot4", 4),
        ("edit", 40),
    ]
    assert payload["remake"][0]["why"]["parts"] == ["Mara.description"]
    assert payload["remake"][2]["why"]["inputs"] == ["shot2", "shot4"]
    assert payload["kept"] == ["shot1", "shot3", "shot5"]
    title, _ = _remake_card("de")
    assert title == (
        "3 von 6 kostenpflichtigen Knoten neu machen, insgesamt 0,48 EUR; 3 bleiben, wie sie "
        "sind. shot2 und shot4 zeigen Mara; geändert hat sich: description. "
        "edit baut auf neu Gemachtem auf: shot2 und shot4."
    )


def test_a_first_run_keeps_the_plain_price_title() -> None:
    plan = price_plan(NODES, _leaf(DOC), lambda n, h: False, _price, {"storyboard": DOC})
    title, payload = price_card(plan, reasons(plan, {}, PAID), PAID, "en")
    assert title == "Flow run: 6 paid nodes, 0.60 EUR in total"
    assert payload == {"kept": []}
