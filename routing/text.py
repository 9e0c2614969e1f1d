"""Words for routing: canonical content terms (EN+DE, and the commonest function words of
French, Spanish, Italian and Dutch left out too), shared by the keyword index, the
duplicate check's word comparison and the offline router, so all three agree."""

from __future__ import annotations

import re
import threading
from typing import Any

_TOKEN = re.compile(r"[^\W\d_]+", re.UNICODE)

STOPWORDS = frozenset(
    """
    a an the and or of for to in on at by with from into onto as is are was were be been
    this that these those it its it's my our your me we you i us them they he she his her
    please pls can could would will should do does did make made makes let get give want
    some any all one ones just also very bit little more less than then there here now
    time last previous earlier recent recently again same other another new still
    about like up down out off over so but not no yes ok okay thanks thank hey hi hello
    what which how when where who why
    der die das den dem des ein eine einen einem einer eines und oder von vom zu zum zur
    im in am an auf mit für aus als ist sind war waren sein bitte kannst könntest kann
    mach mache machen mal noch etwas ein bisschen bissl mehr weniger dieser diese dieses
    es sie er wir ihr ich mir mich uns du dir dein deine mein meine unser unsere euer
    letzte letzten letztes neulich gestern vorhin wieder gleiche andere neue neuen neues
    auch nur so aber nicht kein keine ja nein danke hallo hi welche welcher was wie wo wer
    warum wann doch schon gerne gern bei nach über unter fürs ins beim ums vors übers
    le la les un une des du et ou dans sur pour avec moi toi nous vous ce cette mon ma mes
    il elle te est plaît svp el los las una unos unas y en con por para mí tu su del al
    favor lo gli di da per ti het een de voor mij
    """.split()
)

# German and inflected forms folded onto one English term, so "Plakate" meets "posters".
SYNONYMS: dict[str, str] = {
    "posters": "poster",
    "plakat": "poster",
    "plakate": "poster",
    "plakaten": "poster",
    "plakats": "poster",
    "katze": "cat",
    "katzen": "cat",
    "cats": "cat",
    "kater": "cat",
    "bild": "image",
    "bilder": "image",
    "bildes": "image",
    "images": "image",
    "picture": "image",
    "pictures": "image",
    "photo": "image",
    "foto": "image",
    "fotos": "image",
    "videos": "video",
    "clip": "video",
    "clips": "video",
    "logos": "logo",
    "marke": "brand",
    "marken": "brand",
    "markenplakate": "poster",
    "markenplakaten": "poster",
    "plakatserie": "poster",
    "posterserie": "poster",
    "hochzeitskarte": "wedding",
    "hund": "dog",
    "hunde": "dog",
    "dogs": "dog",
    "serie": "series",
    "reihe": "series",
    "sommerfest": "festival",
    "fest": "festival",
    "festivals": "festival",
    "sommer": "summer",
    "herbst": "autumn",
    "fall": "autumn",
    "frühling": "spring",
    "winter": "winter",
    "geburtstag": "birthday",
    "einladung": "invitation",
    "einladungen": "invitation",
    "invitations": "invitation",
    "karte": "card",
    "karten": "card",
    "cards": "card",
    "wärmer": "warmer",
    "kühler": "cooler",
    "kälter": "cooler",
    "blau": "blue",
    "blaue": "blue",
    "blauen": "blue",
    "rot": "red",
    "rote": "red",
    "roten": "red",
    "grün": "green",
    "grüne": "green",
    "gelb": "yellow",
    "heller": "brighter",
    "dunkler": "darker",
    "hintergrund": "background",
    "produkt": "product",
    "produkte": "product",
    "products": "product",
    "launch": "launch",
    "verkauf": "sale",
    "ausverkauf": "sale",
    "sales": "sale",
    "weihnachten": "christmas",
    "weihnachts": "christmas",
    "hochzeit": "wedding",
    "kampagne": "campaign",
    "campaigns": "campaign",
    "storyboard": "storyboard",
    "illustrationen": "illustration",
    "illustrations": "illustration",
    "buch": "book",
    "kinderbuch": "book",
    "menü": "menu",
    "speisekarte": "menu",
    "restaurant": "restaurant",
    "café": "cafe",
    "cafe": "cafe",
    "kaffee": "coffee",
}


# Goal verbs and framing words: they say *that* someone wants work, not *which* work, so
# the duplicate check's word comparison ignores them.
FILLER = frozenset(
    """
    create creating generate design start begin work plan produce need would like help
    series set draft drafts version versions make new
    erstelle erstellen generiere entwirf entwerfen gestalte gestalten starte beginne
    arbeite plane produziere brauche möchte hätte gern hilf entwurf entwürfe
    """.split()
)


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def canonical(token: str) -> str:
    return SYNONYMS.get(token, token)


def content_terms(text: str) -> list[str]:
    """Canonical content words in order of first appearance (no stopwords, no duplicates)."""
    out: list[str] = []
    for tok in tokens(text):
        if tok in STOPWORDS or len(tok) < 2:
            continue
        term = canonical(tok)[:60]
        if term not in out:
            out.append(term)
    return out


def differing_words(message: str, candidate: str) -> tuple[list[str], list[str]]:
    """Content words only in the message, and only in the candidate. Embeddings put "a bit
    warmer" and "a bit cooler" at ~0.9 cosine; these lists are what tells them apart."""
    mine = [w for w in content_terms(message) if w not in FILLER]
    theirs = [w for w in content_terms(candidate) if w not in FILLER]
    return [w for w in mine if w not in theirs], [w for w in theirs if w not in mine]


# Language by closed-class words (pronouns, articles, auxiliaries, greetings), which every
# sentence has whatever it is about; an umlaut or ß counts for German. The router and the
# offline stand-in both use it for the reply language.
_GERMAN = frozenset(
    """
    ich du er sie wir ihr mich dich mir dir uns euch mein meine meinen meinem meiner dein
    deine sein seine unser unsere unserer unseres euer der die das den dem des ein eine
    einen einem einer eines und oder aber nicht kein keine keinen ist sind bin bist hat
    habe haben hast wird werden kann kannst können soll sollst will willst möchte mit von
    vom zu zum zur für auf aus bei nach im am ins über unter dass wie was wer wo welche
    welcher welches gibt es auch noch schon bitte danke hallo tschüss guten abend morgen
    mal etwas alles klar mach mache machen erstelle generiere zeichne male lass sich heute
    sehr ziemlich viel viele vergiss merk bild
    """.split()
)
_ENGLISH = frozenset(
    """
    i you he she it we they me my your our their the a an and or but not no is are am was
    were have has had will can could would should with of to for on in at from by that this
    these those what how which who where please thanks thank hello hi bye make create draw
    give need want like do does don't it's i'm
    """.split()
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)


def detect_language(text: str) -> str:
    """The language of the person's words as an ISO 639-1 code: any language the
    multilingual embedder covers (`EMBEDDER_LANGUAGES`), English when unsure. English and
    German by their closed-class words (reliable on the shortest messages); another
    language only when the shipped character n-gram model (py3langid, no download) is sure
    of it, since a two-word message is easily mistaken."""
    words = [w.lower() for w in _WORD.findall(text)]
    german = sum(w in _GERMAN for w in words) + len(re.findall(r"[äöüß]", text, re.I))
    english = sum(w in _ENGLISH for w in words if w not in _GERMAN)
    # Clearly English or German by its function words: no need for the n-gram model.
    if len(words) >= 2 and abs(german - english) < 2:
        code, prob = _identify(text)
        if code not in ("en", "de") and prob >= OTHER_LANGUAGE_MIN:
            return code
    return "de" if german > english else "en"


# The languages multilingual USE v3 was trained on (vectors/embeddings.py): understanding
# by meaning reaches these, so recognising the language does too.
EMBEDDER_LANGUAGES = {
    "ar": "Arabic",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "th": "Thai",
    "tr": "Turkish",
    "zh": "Chinese",
}
OTHER_LANGUAGE_MIN = 0.7
_identifier: Any = None
_identifier_lock = threading.Lock()


def _identify(text: str) -> tuple[str, float]:
    global _identifier
    with _identifier_lock:
        if _identifier is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            ident.set_languages(sorted(EMBEDDER_LANGUAGES))
            _identifier = ident
    code, prob = _identifier.classify(text)
    return str(code), float(prob)


def language_name(code: str) -> str:
    """The language's English name, for telling a model which language to answer in."""
    return EMBEDDER_LANGUAGES.get(code, code)
