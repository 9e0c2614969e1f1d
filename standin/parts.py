"""The parts a request names, read off its words: each piece of work the person asks for
("three retro posters", "one short reel of 15 s", "Hintergrundmusik"), with its count,
medium, length and format, in the order named. English and German.

A part is a noun that names a made thing (a poster, a reel, a jingle, a 3D model),
found in a lexicon that also knows German compounds by their last word ("Werbeplakate",
"Hintergrundmusik"). Its count is a number before it (digits or number words, "a"/"ein"
for one); its length the seconds written before it ("15-second", "zehnsekündig") or just
after it ("of 15 seconds", "20 Sekunden lang"). A noun that only names what a piece shows
or whom it is for is no part: after a possessive or a definite article ("with our logo"),
and a picture noun after "with" on a picture ("posters with photos"). Names of brands,
shops or websites are subjects. What the catalogue cannot make (a website, an app) is
reported, as are counts that contradict each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "dozen": 12,
    "eins": 1, "zwei": 2, "drei": 3, "vier": 4, "fünf": 5, "sechs": 6, "sieben": 7,
    "acht": 8, "neun": 9, "zehn": 10, "elf": 11, "zwölf": 12, "fünfzehn": 15,
    "zwanzig": 20, "dreißig": 30, "vierzig": 40, "fünfzig": 50, "hundert": 100,
    "dutzend": 12,
}  # fmt: skip
_ONE = {"a", "an", "one", "single", "ein", "eine", "einen", "einem", "einer", "eines", "einzige"}
_OPEN = {"some", "several", "few", "couple", "paar", "einige", "mehrere", "many", "viele"}
# Words before a noun that make it a reference to something that exists, not a new piece.
_OWNED = {
    "my", "our", "your", "their", "his", "her", "its", "the", "this", "that", "these",
    "those", "mein", "meine", "meinen", "meinem", "meiner", "meines", "unser", "unsere",
    "unseren", "unserem", "unserer", "unseres", "dein", "deine", "deinen", "deinem",
    "deiner", "euer", "eure", "euren", "eurem", "der", "die", "das", "den", "dem", "des",
    "diese", "dieser", "diesen", "diesem", "dieses",
}  # fmt: skip
# Words that end the phrase of a noun, looking left for its count.
_BREAK = {
    "for", "with", "and", "or", "of", "about", "from", "to", "in", "on", "at", "by", "plus",
    "für", "mit", "und", "oder", "von", "über", "aus", "zu", "zum", "zur", "im", "auf",
    "als", "sowie", "dazu", "then", "dann", "also", "auch", "fürs",
}  # fmt: skip
_SUBJECT = {"for", "für", "fürs", "about", "über", "zu", "zum", "zur", "on", "auf"}

# Each entry: a medium and the noun's forms (singular | plural), English and German,
# lower case; German compounds match by their last word.
_LEXICON: tuple[tuple[str, str, str], ...] = (
    ("image", "poster|plakat|banner|flyer|sticker|aufkleber|icon|ikone|logo|emblem",
     "posters|plakate|plakaten|banners|banner|flyers|flyer|stickers|sticker|aufklebern|"
     "aufkleber|icons|logos|embleme"),
    ("image", "postcard|postkarte|card|karte|invitation|einladung|einladungskarte|menu|"
     "speisekarte|label|etikett|badge|coaster|untersetzer",
     "postcards|postkarten|cards|karten|invitations|einladungen|menus|labels|etiketten|"
     "badges|coasters|untersetzer"),
    ("image", "picture|bild|image|photo|foto|illustration|drawing|zeichnung|painting|gemälde|"
     "artwork|motif|motiv|print|druck|wallpaper|hintergrundbild|thumbnail|vorschaubild|"
     "mockup|emoji|avatar|portrait|porträt|graphic|grafik|visual|infographic|infografik|"
     "meme|header|headerbild|titelbild|cover|umschlag|page|seite|frame|panel|tile|kachel|"
     "pattern|muster|ad|advert|anzeige|post|beitrag|design|entwurf|storyboard|slide|"
     "template|vorlage|shot",
     "pictures|bilder|bildern|images|photos|fotos|illustrations|illustrationen|drawings|"
     "zeichnungen|paintings|artworks|motifs|motive|motiven|prints|drucke|wallpapers|"
     "thumbnails|mockups|emojis|avatars|portraits|porträts|graphics|grafiken|visuals|"
     "infographics|memes|headers|covers|pages|seiten|frames|panels|tiles|kacheln|patterns|"
     "ads|adverts|anzeigen|posts|beiträge|beiträgen|designs|entwürfe|storyboards|slides|"
     "templates|vorlagen|shots"),
    # Scenes and shots are pictures inside a storyboard only ("a storyboard of four scenes").
    ("scene", "scene|szene|einstellung", "scenes|szenen|einstellungen"),
    ("video", "video|clip|reel|film|movie|animation|trailer|teaser|spot|commercial|intro|"
     "outro|gif",
     "videos|clips|reels|filme|films|movies|animations|animationen|trailers|trailer|"
     "teasers|teaser|spots|commercials|intros|outros|gifs"),
    ("audio", "jingle|song|lied|music|musik|soundtrack|track|sound|geräusch|klang|melody|"
     "melodie|voiceover|voice-over|sprachaufnahme|ringtone|klingelton|beat|theme|tune|"
     "audio|loop|hymne|anthem|soundeffekt|sound-effekt|sting|stinger|lullaby|schlaflied|"
     "soundscape|geräuschkulisse|klangkulisse|klangteppich|atmo|audiodatei|tondatei|"
     "musikstück|tusch|fanfare|"
     "wiegenlied|ansage|durchsage|stimme|narration|podcast-intro|hörspiel|score",
     "jingles|songs|lieder|liedern|soundtracks|tracks|sounds|geräusche|klänge|melodies|"
     "melodien|voiceovers|ringtones|klingeltöne|beats|themes|tunes|loops|hymnen|anthems|"
     "soundeffekte|sound-effekte|effects|effekte|stings|stingers|lullabies|ansagen|"
     "durchsagen|stimmen|hörspiele|scores|soundscapes|geräuschkulissen|audiodateien|"
     "tondateien|musikstücke|fanfaren|fanfares"),
    ("3d", "model|modell|figurine|figur|sculpture|skulptur|statue|object|objekt",
     "models|modelle|modellen|figurines|figuren|sculptures|skulpturen|statues|objects|"
     "objekte"),
)  # fmt: skip
_UNSUPPORTED = (
    r"website|webseite|homepage|landing\s?page|landingpage|internetseite|web\s?app|app|"
    r"application|anwendung|spreadsheet|tabelle|excel|pdf|powerpoint|präsentation|"
    r"presentation|brochure|broschüre|newsletter|e-?mail|font|schriftart|game|spiel|"
    r"software|plugin|document|dokument|text|essay|article|artikel|blog\s?post"
)
_WORD = re.compile(
    r"\d+:\d+|\d+[-‑]?[^\W\d_][\w-]*|\d+(?:[.,]\d+)?|[^\W\d_](?:[\w'’-]*\w)?|[(),.;:!?]", re.UNICODE
)
_MEDIUM_WORDS = {"video": "video", "audio": "audio", "radio": "audio", "animated": "video",
                 "animiert": "video", "animierte": "video", "animierten": "video",
                 "animiertes": "video", "3d": "3d", "3d-": "3d"}  # fmt: skip
_SECONDS = re.compile(r"^(?:seconds?|secs?|s|sek|sekunden?|sekündig\w*)$", re.I)
_MINUTES = re.compile(r"^(?:minutes?|mins?|minuten?|minütig\w*)$", re.I)
_FORMAT = re.compile(
    r"^(?:\d+:\d+|square|quadratisch\w*|portrait|hochformat|landscape|querformat|"
    r"widescreen|vertical|vertikal\w*|horizontal\w*|a[0-6])$",
    re.I,
)
_FORM_WORDS = {"book", "books", "buch", "series", "serie", "set", "kit", "campaign", "kampagne",
               "identity", "comic", "comics", "collection", "sammlung", "reihe"}  # fmt: skip
_MAKING = re.compile(
    r"^(?:make|build|create|design|code|program|develop|set|setup|write|need|want|"
    r"mach\w*|bau\w*|erstell\w*|programmier\w*|entwick\w*|gestalt\w*|schreib\w*|"
    r"brauch\w*|bräucht\w*|möcht\w*|hätte|entwirf|richte\w*)$",
    re.I,
)
_ONE_FOR = re.compile(r"\b(?:one|eins|einen|eine|einer|ein)\s+(?:for|für|fürs|zum|zur)\b", re.I)
_ONE_EACH = re.compile(
    r"\b(?:one|ein\w*)\s+(?:for each|for every|per|pro|je|für jede\w*)\s+(?:of\s+)?"
    r"(?:\w+\s+)?(\w+)|\bfür jede\w*\s+der\s+(\w+)",
    re.I,
)
_EACH = re.compile(r"\b(?:one|ein|eins|eine)\s+(?:per|pro|je|für\s+jede\w*)\b|\bje\s+\w+\b", re.I)


@dataclass(frozen=True)
class Named:
    """One part the request names."""

    word: str  # the person's own words for the piece ("retro posters")
    medium: str
    count: int | None  # None: no number named
    plural: bool
    duration_s: int | None = None
    formats: tuple[str, ...] = ()
    stem: str = ""


@dataclass
class Reading:
    parts: list[Named] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # what the catalogue cannot make
    conflicts: list[tuple[int, int]] = field(default_factory=list)  # counts that contradict


def _forms() -> list[tuple[str, str, bool, str]]:
    """(form, medium, plural, stem) for every noun form, longest first so a compound's
    longest known end wins ("einladungskarte" before "karte")."""
    out = []
    for medium, singular, plural in _LEXICON:
        sing = singular.split("|")
        for form in sing:
            out.append((form, medium, False, form))
        for form in plural.split("|"):
            stem = next((s for s in sing if form.startswith(s[:4])), form)
            out.append((form, medium, True, stem))
    return sorted(out, key=lambda f: -len(f[0]))


_FORMS = _forms()
# German words that end in a piece's noun but name none ("Eindruck", "Webseite", "Brettspiel").
_DE_WHOLE = {"seite", "seiten", "spiel", "druck", "drucke", "text", "objekt", "objekte", "klang",
             "figur", "muster", "model", "models", "art", "loop", "post"}  # fmt: skip
# Forms that are singular and plural alike ("sticker", "Banner"): plural unless counted.
_BOTH = {f for f, _, plural, _ in _FORMS if plural} & {
    f for f, _, plural, _ in _FORMS if not plural
}
# Words that end like a made thing but are none.
_NOT_NOUNS = {"discover", "discovers", "recover", "uncover", "lexicon", "imposter", "webpage",
              "webpages", "homepage", "homepages", "vorbild", "leitbild", "sinnbild",
              "abbild", "ebenbild", "weltbild", "feindbild", "zerrbild", "gesamtbild",
              "krankheitsbild", "berufsbild", "mitglied", "mitglieder", "bindeglied",
              "bestimme", "abstimme", "zustimme"}  # fmt: skip
# The first word of a compound that says its medium ("Hörspiel-Intro", "Werbevideo").
_COMPOUND_MEDIUM = (("hörspiel", "audio"), ("podcast", "audio"), ("radio", "audio"),
                    ("audio", "audio"), ("musik", "audio"), ("video", "video"))  # fmt: skip
# Heads that take their medium from the noun before them ("video ad", "audio post").
_NEUTRAL = {"ad", "ads", "advert", "adverts", "anzeige", "anzeigen", "design", "designs",
            "post", "posts", "beitrag", "beiträge", "spot", "spots", "template", "templates",
            "vorlage", "vorlagen", "teaser", "loop", "loops"}  # fmt: skip
# English nouns after which a piece's noun only qualifies ("an ad idea", "a music festival").
_QUALIFIED = {"idea", "ideas", "campaign", "shoot", "call", "festival", "night", "evening",
              "event", "session", "project", "concept", "pitch", "brief", "style", "look",
              "studio", "shop", "store", "channel", "account", "club", "team", "contest",
              "competition", "screening", "budget", "launch", "lover", "lovers", "fan",
              "fans", "school", "class", "course", "workshop", "room", "wall"}  # fmt: skip
_EARLIER = {"yesterday", "gestrige", "gestrigen", "gestriges", "gestriger", "letzte", "letzten",
            "letztes", "vorige", "vorigen", "voriges", "earlier", "previous", "last"}  # fmt: skip
_UNITS = {"piece", "pieces", "bit", "bits", "snippet", "snippets"}
_REFERS = {"the", "these", "those", "all", "die", "diese", "alle", "allen", "jene", "sämtliche"}
_PIECES = {"stück", "pieces", "stücke", "exemplare", "varianten", "variants", "versions",
           "versionen", "mal"}  # fmt: skip
_EXACT_ONLY = {"ad", "ads", "post", "posts", "art", "app", "gif", "gifs", "spot", "short",
               "shorts", "story", "tile", "theme", "track", "card", "cards", "text", "frame",
               "frames", "page", "pages", "print", "design", "designs", "object", "objects",
               "model", "models", "loop", "loops", "beat", "beats", "tune", "sound",
               "sounds", "intro", "outro", "seite", "seiten", "spiel", "figur",
               "objekt", "klang", "song", "songs", "film", "filme", "films",
               "karte", "karten", "muster", "druck", "drucke",
               "spots", "effects", "effekte", "anzeige", "anzeigen", "label", "labels",
               "badge", "header", "panel"}  # fmt: skip


def _noun(token: str) -> tuple[str, bool, str] | None:
    """(medium, plural, stem) when the token names a made thing; compounds by their last
    word ("Werbeplakate", "Instagram-Posts"), a short or common word only whole."""
    low = token.lower()
    if low in _NOT_NOUNS:
        return None
    for form, medium, plural, stem in _FORMS:
        if low == form:
            return medium, plural, stem
        if len(low) <= len(form) + 2 or not low.endswith(form):
            continue
        head = low[: -len(form)]
        # Compounds are German nouns, written with a capital ("Werbeplakate"); a lower-case
        # English word that ends like a piece is another word ("frosting", "discover").
        upper = token[:1].isupper() and form not in _DE_WHOLE
        said_medium = any(head.startswith(w) for w, _ in _COMPOUND_MEDIUM)  # "Radiospot"
        if head.endswith("-") or (upper and (form not in _EXACT_ONLY or said_medium)):
            said = next((m for w, m in _COMPOUND_MEDIUM if head.startswith(w)), medium)
            return (said if medium in ("image", "video") else medium), plural, head + stem
    upper = token[:1].isupper()
    if upper and low.endswith(("ern", "en", "eln")) and (found := _noun(token[:-1])):
        return found[0], True, found[2]  # the German dative plural: "mit drei Stickern"
    return None


def _number(token: str) -> int | None:
    low = token.lower()
    if low.isdigit():
        return int(low)
    return _NUMBERS.get(low)


_HALF_MINUTE = re.compile(
    r"\bhalf[- ]a[- ]minute\b|\bhalf-minute\b|\b(?:einer|eine|ner)\s+halben\s+minute\b|"
    r"\bhalbe[n]?\s+minute\b|\bhalbminütig\w*",
    re.I,
)


def read(text: str) -> Reading:
    text = _HALF_MINUTE.sub("30 seconds", text)
    tokens = _WORD.findall(text)
    low = [t.lower() for t in tokens]
    out = Reading()
    heads: list[tuple[int, Named]] = []
    skip = -1
    for i, tok in enumerate(tokens):
        pair = f"{low[i]} {low[i + 1]}" if i + 1 < len(low) else ""
        if i <= skip:
            continue
        end = low[i].rsplit("-", 1)[-1] if tok[:1].isupper() else ""  # "Excel-Tabelle"
        first = low[i].split("-", 1)[0]
        if "-" in low[i] and _noun(end.capitalize()) is None and re.fullmatch(_UNSUPPORTED, first):
            end = first  # "PDF-Preisblatt": a PDF, where its last word names no piece
        if any(re.fullmatch(_UNSUPPORTED, w) for w in (low[i], pair, end)) and _made_here(low, i):
            whole = pair if re.fullmatch(_UNSUPPORTED, pair) else low[i]
            skip = i + whole.count(" ")
            lead = f"{tokens[i - 1]} " if i and low[i - 1] in _ONE else ""
            out.unsupported.append(lead + " ".join(tokens[i : skip + 1]))
            continue
        found = _noun(tok)
        if found is None or _verb(low, i):
            continue
        if _is_format_here(low, i):
            continue  # "in portrait", "A4 portrait": the format of a piece
        if i + 1 < len(low) and low[i + 1] in _QUALIFIED:
            continue
        if _described(low, i) or _made_as(low, i, heads, found[0]):
            continue
        medium, plural, stem = found
        if medium == "3d" and not _says_3d(low, i):
            continue
        part = _phrase(tokens, low, i, medium, plural, stem)
        if part is not None and part.count == 1 and _rate_after(low, i):
            part = replace(part, count=None)  # "one clip per day": a rate, not a count
        if part is not None:
            heads.append((i, part))
    heads = _counted_after(_timed_after(_merged(heads, low), low), low)
    out.parts = [_in_context(p, low) for i, p in heads if not _weak(p, low, i, heads)]
    out.conflicts = _conflicts(out.parts, low)
    return out


# Nouns that name a piece only with a length, a number above one, or a medium said with
# them ("a fun intro to the plot" is none; "ein Intro mit 20 Sekunden" is one).
_WEAK = {"intro", "outro", "teaser", "loop", "theme", "spot", "short"}
_AUDIO_CONTEXT = re.compile(
    r"podcast|radio|hörspiel|playlist|spotify|anrufbeantworter|voicemail|hotline",
    re.I,
)


def _weak(p: Named, low: list[str], i: int, heads: list[tuple[int, Named]]) -> bool:
    if p.stem not in _WEAK:
        return False
    said_with = " ".join(p.word.lower().split()[:-1])
    medium_word = _AUDIO_CONTEXT.search(said_with) or re.search(r"video|audio|youtube", said_with)
    strong = p.duration_s or (p.count or 0) > 1 or "-" in low[i] or medium_word
    return not strong


def _in_context(p: Named, low: list[str]) -> Named:
    """An intro, outro or loop is a sound where the request is about sound (a podcast,
    the radio), else a clip."""
    if p.stem in _WEAK and p.medium == "video" and _AUDIO_CONTEXT.search(" ".join(low)):
        return replace(p, medium="audio")
    return p


def _timed_after(heads: list[tuple[int, Named]], low: list[str]) -> list[tuple[int, Named]]:
    """A length said later in the sentence ("…mit Hintergrundmusik, so 20 Sekunden lang")
    belongs to the nearest clip or sound before it that has none."""
    out = list(heads)
    for j, w in enumerate(low):
        n = _number(w)
        seconds = _seconds(n, low[j + 1]) if n and j + 1 < len(low) and (
            _is_time_unit(low[j + 1])) else _compact_seconds(w)  # fmt: skip
        if not seconds or any(p.duration_s == seconds for _, p in out):
            continue
        # The nearest clip before it in the sentence, else the nearest sound; a sentence
        # that names no piece ("About 25 seconds, warm voice") speaks of the last one.
        own = not any(_sentence_between(low, i, j) for i, _ in out if i < j) or any(
            not _sentence_between(low, j, i) for i, _ in out if i > j
        )
        near = [k for k, (i, p) in enumerate(out) if i < j]
        before = [k for k in near if not _sentence_between(low, out[k][0], j)] if own else near[-1:]
        untimed = [k for k in before if out[k][1].duration_s is None]
        for medium in ("video", "audio"):
            if ks := [k for k in untimed if out[k][1].medium == medium]:
                i, p = out[ks[-1]]
                out[ks[-1]] = (i, replace(p, duration_s=seconds))
                break
    return out


def _sentence_between(low: list[str], i: int, j: int) -> bool:
    """A full stop between two words; not the one of an abbreviation ("Co.", "St.")."""
    return any(
        w in ("!", "?") or (w == "." and len(low[k - 1]) > 3)
        for k, w in enumerate(low[i:j], start=i)
    )


def _counted_after(heads: list[tuple[int, Named]], low: list[str]) -> list[tuple[int, Named]]:
    """ "Banner …, vier Stück": a count after the noun, for the nearest one before it."""
    out = list(heads)
    for k, (i, p) in enumerate(out):
        after = low[i + 1 : i + 4]
        if p.count is None and p.plural and after and after[0] in ("of", "von"):
            n = next((_number(w) for w in after[1:] if _number(w)), None)
            if n:
                out[k] = (i, replace(p, count=n))  # "pictures of the five bestsellers"
    for j, w in enumerate(low[:-1]):
        n = _number(w)
        if n is None or low[j + 1] not in _PIECES:
            continue
        for k in range(len(out) - 1, -1, -1):
            i, p = out[k]
            if i < j and p.count in (None, 1) and p.plural:
                out[k] = (i, replace(p, count=n))
                break
    return out


def _rate_after(low: list[str], i: int) -> bool:
    """ "one clip per day", "one picture for each stall": a rate, not a count."""
    after = low[i + 1 : i + 3]
    if after and after[0] in ("per", "pro", "je", "each", "a", "every"):
        return True
    return after[:1] in (["for"], ["für"]) and after[1:2] in (["each"], ["every"], ["jede"],
                                                             ["jeden"], ["jedes"])  # fmt: skip


def _made_as(low: list[str], i: int, heads: list[tuple[int, Named]], medium: str) -> bool:
    """ "2 Etikettenentwürfe als Bild", "music … as a temp track": what a piece named
    before is made as (a noun of another medium after "als" is a piece of its own: "ein
    Wiehern als Sound")."""
    j = i - 1
    while j >= max(0, i - 3) and low[j] not in ("als", "as") and low[j] not in _BREAK:
        j -= 1
    as_ = j >= 0 and low[j] in ("als", "as")
    return bool(as_ and heads and heads[-1][1].medium == medium)


def _is_format_here(low: list[str], i: int) -> bool:
    if not _FORMAT.match(low[i]):
        return False
    near = [low[i - 1] if i else "", low[i + 1] if i + 1 < len(low) else ""]
    return near[0] in ("in", "im", "als", "as") or any(_FORMAT.match(w) for w in near if w)


def _described(low: list[str], i: int) -> bool:
    """ "Each page should be one big illustration": a sentence that starts with "each"
    says what the pieces are like, it names none."""
    j = i - 1
    while j >= 0 and low[j] not in (".", "!", "?", ";"):
        j -= 1
    return j + 1 < i and low[j + 1] in ("each", "every", "jede", "jeder", "jedes", "jeden")


def _verb(low: list[str], i: int) -> bool:
    """ "Design a logo", "please film the street": a noun form used as the request's verb,
    at the start and followed by what it makes."""
    start = i == 0 or low[i - 1] in (".", "!", "?", ":", "please", "bitte", "to", "you", "and")
    after = low[i + 1] if i + 1 < len(low) else ""
    return start and (after in _ONE or after in _OWNED or _number(after) is not None)


def _made_here(low: list[str], i: int) -> bool:
    """An unsupported thing the request asks to be made ("a website and three banners"),
    not one it is for ("banners for my website", "icons for our app")."""
    before = low[max(0, i - 3) : i]
    # The nearest determiner before it decides: "eine Excel-Tabelle" is made, "für meine
    # Website" is whom other pieces are for.
    for w in reversed(before):
        if w in _SUBJECT or w in _OWNED:
            return False
        if w in _ONE or _number(w) is not None:
            break
    # A verb in its sentence asks for it, before it or (German) at the end: not "we're
    # launching an app".
    j, k = i - 1, i + 1
    while j >= 0 and low[j] not in (".", "!", "?", ";"):
        j -= 1
    while k < len(low) and low[k] not in (".", "!", "?", ";", ","):
        k += 1
    making = any(_MAKING.match(w) for w in low[j + 1 : k])
    return making and any(w in _ONE or _number(w) is not None for w in before)


def _says_3d(low: list[str], i: int) -> bool:
    near = low[max(0, i - 4) : i + 3]
    return any(w.startswith("3d") or w.startswith("dreidimensional") for w in near) or (
        low[i].startswith("3d")
    )


def _phrase(
    tokens: list[str], low: list[str], i: int, medium: str, plural: bool, stem: str
) -> Named | None:
    """The noun's phrase to its left: count, adjectives, length and format."""
    count: int | None = None
    words: list[str] = []
    seconds: int | None = None
    formats: list[str] = []
    j = i - 1
    seconds = _compact_seconds(low[i])  # "20-Sekunden-Clip"
    while j >= 0 and i - j <= 5:
        w = low[j]
        if w in _SUBJECT and count is None:
            return None  # "banners for the About page": whom the piece is for
        if w in ("of", "von") and j >= 2 and _is_time_unit(low[j - 1]) and _number(low[j - 2]):
            seconds = _seconds(_number(low[j - 2]) or 0, low[j - 1])  # "30 seconds of music"
            break
        if w == "of" and j >= 1 and low[j - 1] in _UNITS:
            words[:0] = tokens[j - 1 : j + 1]  # "a 20-second piece of music": one piece
            j -= 2
            continue
        if w in _BREAK or not re.match(r"[\w]", w):
            break
        if (n := _number(w)) is not None:
            if j + 1 < i and _is_time_unit(low[j + 1]):
                seconds = _seconds(n, low[j + 1])
            elif count is None:
                count = n
                if j and low[j - 1] in _SUBJECT:
                    return None
                break
        elif w in ("per", "pro", "je", "each", "every", "jede", "jeden", "jedes", "jeder"):
            return None  # "one scene per page": the page is the unit, not a piece
        elif w in _ONE:
            count = 1
            if j and low[j - 1] in _SUBJECT:
                return None  # "music for a trailer": what the piece is for
            break
        elif w.endswith(("'s", "’s")) or w in _EARLIER:
            if count is None:
                return None  # "yesterday's cat picture": a piece that exists already
            break
        elif w in _OPEN or w in _OWNED:
            if w in _OWNED and count is None:
                return None  # "our logo": what the piece shows, not a piece
            plural = plural or (w in _OPEN and low[i] in _BOTH)
            break
        elif _is_time_unit(w):
            pass
        elif compact := _compact_seconds(w):
            seconds = compact
        else:
            if _FORMAT.match(w):
                formats.append(tokens[j])
            medium = _MEDIUM_WORDS.get(w, medium) if medium != "3d" else medium
            words.insert(0, tokens[j])
        j -= 1
    if count is None and low[i] in _BOTH:
        plural = True
    word = " ".join([*words[-2:], tokens[i]])
    if seconds is None:
        seconds = _seconds_after(low, i)
    fmt_after = _format_after(tokens, low, i)
    return Named(word, medium, count, plural or count not in (None, 1), seconds,
                 tuple(formats + fmt_after), stem)  # fmt: skip


def _is_time_unit(w: str) -> bool:
    return bool(_SECONDS.match(w) or _MINUTES.match(w))


def _seconds(n: int, unit: str) -> int:
    return n * 60 if _MINUTES.match(unit) else n


def _compact_seconds(w: str) -> int | None:
    """ "15-second", "30-sekündigen", "zehnsekündigen", "20s", "2-minute"."""
    m = re.match(r"^(\d+|[^\W\d_]+?)[-‑]?(seconds?|sekunden|sekündig\w*|s|sek|minute|minuten|"
                 r"minütig\w*)(?:-\w+)?$", w)  # fmt: skip
    if not m:
        return None
    n = _number(m.group(1))
    if n is None:
        return None
    return n * 60 if m.group(2).startswith("min") else n


def _seconds_after(low: list[str], i: int) -> int | None:
    """ "a reel of 15 seconds", "ein Clip von 20 Sekunden", "(15 s)", "20 seconds long"."""
    for j in range(i + 1, min(len(low), i + 6)):
        w = low[j]
        if _noun(w) is not None or w in ("and", "und", ";", "."):
            return None
        n = _number(w)
        if n is not None and j + 1 < len(low) and _is_time_unit(low[j + 1]):
            return _seconds(n, low[j + 1])
        if compact := _compact_seconds(w):
            return compact
    return None


def _format_after(tokens: list[str], low: list[str], i: int) -> list[str]:
    out = []
    for j in range(i + 1, min(len(low), i + 4)):
        if _noun(low[j]) is not None or low[j] in ("and", "und", ",", ";", "."):
            break
        if _FORMAT.match(low[j]):
            out.append(tokens[j])
    return out


def _merged(heads: list[tuple[int, Named]], low: list[str]) -> list[tuple[int, Named]]:
    """Drop nouns that are not parts of their own: a noun before a form word ("picture
    book") or before another noun it qualifies ("video ad", "intro sting"), a container
    before "of N frames" (a storyboard of five scenes), a noun of the same medium after
    "with" on a piece ("posters with photos"), and a second mention of the same piece."""
    out: list[tuple[int, Named]] = []
    for k, (i, part) in enumerate(heads):
        nxt = heads[k + 1] if k + 1 < len(heads) else None
        if i + 1 < len(low) and low[i + 1] in _FORM_WORDS:
            continue
        if nxt and nxt[0] == i + 1:
            if nxt[1].stem in _NEUTRAL or low[nxt[0]] in _NEUTRAL:
                heads[k + 1] = (nxt[0], _with_medium(nxt[1], part))
            continue
        if nxt and part.count in (None, 1) and nxt[1].count and nxt[0] - i <= 3:
            inner = nxt[1].medium in (part.medium, "scene")
            if inner and low[i + 1] in ("of", "aus", "mit", "with", "von"):
                if nxt[1].medium == "scene":
                    heads[k + 1] = (nxt[0], replace(nxt[1], medium=part.medium))
                continue  # the container: the counted noun after it is the part
        if part.stem == "storyboard" and nxt and nxt[1].count and nxt[0] - i <= 8:
            if nxt[1].medium in ("image", "scene"):
                heads[k + 1] = (nxt[0], replace(nxt[1], medium="image"))
                continue  # "ein Storyboard für einen Trailer, sechs Bilder"
        if part.medium == "scene":
            continue  # a scene outside a storyboard is what a piece shows
        prev = out[-1][1] if out else None
        after_with = i > 0 and low[i - 1] in ("with", "mit")
        if prev and after_with and prev.medium == part.medium and part.count is None:
            continue
        same = prev is not None and part.word.lower() == prev.word.lower()
        again = prev is not None and (part.count is None or (same and part.count == prev.count))
        if prev and prev.stem == part.stem and again:
            continue
        out.append((i, part))
    return out


def _with_medium(head: Named, modifier: Named) -> Named:
    words = modifier.word.split()[:-1] + head.word.split()[-2:]
    seconds = head.duration_s or modifier.duration_s
    count = head.count if head.count is not None else modifier.count
    return Named(" ".join(words[-3:]), modifier.medium, count, head.plural, seconds,
                 head.formats + modifier.formats, head.stem)  # fmt: skip


def _conflicts(parts: list[Named], low: list[str]) -> list[tuple[int, int]]:
    """Counts that cannot all hold: the same piece counted twice differently, "one per
    card" over two different counts of one medium, or a number that refers back to the
    pieces ("all six", "die fünf sollen …") and is not their count."""
    out = []
    text = " ".join(low)
    for k, a in enumerate(parts):
        for b in parts[k + 1 :]:
            if a.count is None or b.count is None or a.count == b.count:
                continue
            if a.stem == b.stem or (a.medium == b.medium and _EACH.search(text)):
                out.append((a.count, b.count))
    counted = [p.count for p in parts if p.count and p.count > 1]
    if len(counted) != 1:
        return out
    listed = len(_ONE_FOR.findall(text))
    if listed >= 2 and listed != counted[0]:
        out.append((counted[0], listed))  # "3 pictures: one for …, one for …, … and one for …"
    for m in _ONE_EACH.finditer(text):
        n = _number(m.group(1) or m.group(2))
        if n and n != counted[0]:
            out.append((counted[0], n))  # "three portraits, one for each of our four"
    for j in range(1, len(low)):
        n = _number(low[j])
        if n is None or n == counted[0] or low[j - 1] not in _REFERS:
            continue
        ahead = low[j + 1 : j + 3]
        if not any(_noun(w) for w in ahead) and not (ahead and _is_time_unit(ahead[0])):
            out.append((counted[0], n))
    return out
