"""The words catalogue: both languages hold the same sentences with the same placeholders."""

from __future__ import annotations

import string

import pytest

from lomo.words import CATALOGUES, MissingWords, say


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_every_key_is_in_every_language_with_the_same_placeholders() -> None:
    en, de = CATALOGUES["en"], CATALOGUES["de"]
    assert set(en) == set(de), set(en) ^ set(de)
    for key in en:
        assert _fields(en[key]) == _fields(de[key]), key


def test_a_language_without_a_catalogue_gets_english_and_a_missing_key_is_loud() -> None:
    assert say("route.lost", "fr") == CATALOGUES["en"]["route.lost"]
    assert say("route.lost", "de") == CATALOGUES["de"]["route.lost"]
    with pytest.raises(MissingWords):
        say("no.such.sentence", "en")
