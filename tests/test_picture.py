"""Reading a picture's properties from its bytes (workspace/picture.py), on pictures
made here with Pillow and by the simulator's renderer."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from lomo import colours
from sim import render
from workspace.errors import NotAPicture
from workspace.picture import PictureProps, compare, describe, matches, read


def _bytes(img: Image.Image, fmt: str = "PNG", **save: object) -> bytes:
    out = io.BytesIO()
    img.save(out, format=fmt, **save)
    return out.getvalue()


def _solid(rgb: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    return _bytes(Image.new("RGB", size, rgb))


def _split(left: tuple[int, int, int], right: tuple[int, int, int], share: float) -> bytes:
    """A 200×100 picture, its left `share` in one colour, the rest in another."""
    img = Image.new("RGB", (200, 100), right)
    ImageDraw.Draw(img).rectangle((0, 0, round(200 * share) - 1, 99), fill=left)
    return _bytes(img)


def _sim(prompt: str, tmp_path: Path, width: int = 320, height: int = 240) -> bytes:
    params = {"prompt": prompt, "width": width, "height": height}
    return render.render("image", params, tmp_path, f"s{abs(hash(prompt))}").read_bytes()


@pytest.mark.parametrize(
    ("text", "wish"),
    [
        ("a red tabby cat", colours.Wish(("red",))),
        ("ein grünes Feld unter blauem Himmel", colours.Wish(("green", "blue"))),
        ("hellblaues Wasser, etwas wärmer", colours.Wish(("blue",), warmer=1, brighter=1)),
        ("dunkelrote Rosen, kühler", colours.Wish(("red",), warmer=-1, brighter=-1)),
        ("lilafarbene Wolken und weiße Schafe", colours.Wish(("purple", "white"))),
        ("teal and ochre, a bit brighter", colours.Wish(("teal", "ochre"), brighter=1)),
        ("grey and gray and grau", colours.Wish(("grey",))),
        ("Bauer mit Hund, darker", colours.Wish(brighter=-1)),
    ],
)
def test_colour_words_in_english_and_german(text: str, wish: colours.Wish) -> None:
    assert colours.wish(text) == wish


def test_size_brightness_and_warmth_of_a_solid_picture() -> None:
    props = read(_solid((200, 100, 50), (64, 48)))
    assert (props.width, props.height) == (64, 48)
    assert props.brightness == pytest.approx(0.299 * 200 + 0.587 * 100 + 0.114 * 50, abs=0.01)
    assert props.warmth == pytest.approx(150)
    assert read(_solid((10, 20, 240))).warmth == pytest.approx(-230)
    assert props.as_dict() == {
        "width": 64,
        "height": 48,
        "brightness": props.brightness,
        "warmth": 150.0,
        "colours": [{"name": "orange", "share": 1.0}],
    }


def test_means_of_a_large_picture_match_the_full_picture() -> None:
    rng = np.random.default_rng(7)
    px = rng.integers(0, 256, size=(1500, 2000, 3), dtype=np.uint8)
    px[:, :700] = (220, 90, 30)
    props = read(_bytes(Image.fromarray(px)))
    full = px.astype(np.float64)
    assert (props.width, props.height) == (2000, 1500)
    assert props.warmth == pytest.approx(full[..., 0].mean() - full[..., 2].mean(), abs=0.5)
    luma = 0.299 * full[..., 0] + 0.587 * full[..., 1] + 0.114 * full[..., 2]
    assert props.brightness == pytest.approx(luma.mean(), abs=0.5)


@pytest.mark.parametrize("name", colours.NAMES)
def test_each_colour_is_read_by_its_own_name(name: str) -> None:
    for shade in colours.PALETTE[name]:
        assert read(_solid(shade)).names == (name,), shade


@pytest.mark.parametrize(
    ("rgb", "name"),
    [
        ((255, 0, 0), "red"),
        ((0, 0, 255), "blue"),
        ((0, 128, 0), "green"),
        ((255, 255, 0), "yellow"),
        ((255, 165, 0), "orange"),
        ((139, 69, 19), "brown"),
        ((0, 128, 128), "teal"),
        ((128, 0, 128), "purple"),
        ((255, 192, 203), "pink"),
        ((0, 0, 0), "black"),
        ((255, 255, 255), "white"),
        ((169, 169, 169), "grey"),
    ],
)
def test_common_colours_get_their_plain_names(rgb: tuple[int, int, int], name: str) -> None:
    assert read(_solid(rgb)).names == (name,)


def test_colour_shares_are_largest_first_and_small_ones_left_out() -> None:
    props = read(_split((235, 130, 40), (120, 75, 40), 0.7))
    assert props.names == ("orange", "brown")
    assert dict(props.colours)["orange"] == pytest.approx(0.7, abs=0.02)
    tiny = read(_split((40, 90, 200), (245, 245, 245), 0.03))
    assert tiny.names == ("white",)


def test_jpeg_webp_and_transparency() -> None:
    img = Image.new("RGB", (120, 80), (40, 90, 200))
    for fmt in ("JPEG", "WEBP"):
        props = read(_bytes(img, fmt, quality=90))
        assert (props.width, props.height) == (120, 80)
        assert props.names == ("blue",)
        assert props.warmth == pytest.approx(-160, abs=4)
    large = Image.new("RGB", (3200, 2400), (235, 130, 40))
    ImageDraw.Draw(large).rectangle((0, 0, 799, 2399), fill=(40, 90, 200))
    props = read(_bytes(large, "JPEG", quality=90))
    assert (props.width, props.height) == (3200, 2400)  # decoded smaller, sized as stored
    assert props.names == ("orange", "blue")
    assert props.warmth == pytest.approx(0.75 * 195 + 0.25 * -160, abs=3)
    clear = Image.new("RGBA", (50, 50), (0, 0, 0, 0))
    ImageDraw.Draw(clear).rectangle((0, 0, 9, 49), fill=(200, 40, 40, 255))
    props = read(_bytes(clear))
    assert props.names == ("white", "red")  # the transparent part seen on a white page
    assert props.brightness > 200


def test_bytes_that_are_no_picture_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for junk in (b"", b"not a picture", _solid((1, 2, 3))[:40]):
        with pytest.raises(NotAPicture):
            read(junk)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(NotAPicture):
        read(_solid((1, 2, 3), (100, 100)))


def test_describe_in_one_line() -> None:
    props = PictureProps(1024, 768, 190.0, 80.0, (("orange", 0.6), ("brown", 0.3)))
    assert describe(props) == "1024×768, mostly warm orange and brown, bright"
    cool = PictureProps(64, 64, 60.0, -90.0, (("blue", 0.5), ("teal", 0.3), ("grey", 0.1)))
    assert describe(cool) == "64×64, mostly cool blue, teal and grey, dark"
    assert describe(read(_split((235, 130, 40), (120, 75, 40), 0.6))) == (
        "200×100, mostly warm orange and brown, mid-tone"
    )
    noise = np.random.default_rng(3).integers(0, 256, size=(90, 120, 3), dtype=np.uint8)
    described = describe(read(_bytes(Image.fromarray(noise))))
    assert described.startswith("120×90, many colours, most of all ")
    assert described.endswith(", mid-tone")
    spread = PictureProps(8, 8, 120.0, 0.0, ())
    assert describe(spread) == "8×8, many colours, mid-tone"


def test_compare_gives_the_deltas() -> None:
    before = read(_split((40, 90, 200), (245, 245, 245), 0.6))
    after = read(_bytes(Image.new("RGB", (100, 100), (235, 130, 40))))
    delta = compare(before, after)
    assert delta["warmth"] == pytest.approx(after.warmth - before.warmth)
    assert delta["warmth"] > 150
    assert delta["brightness"] == pytest.approx(after.brightness - before.brightness)
    assert delta["colours_gained"] == ["orange"]
    assert delta["colours_lost"] == ["blue", "white"]
    assert delta["size_changed"] is True


def test_matches_a_brief_against_a_before_and_after_pair() -> None:
    before = read(_solid((200, 150, 120)))
    warmer = read(_solid((220, 130, 70)))
    assert matches("a bit warmer", warmer, before).ok
    assert matches(["etwas", "wärmer"], warmer, before).ok
    verdict = matches("a bit warmer", before, warmer)
    assert not verdict.ok
    assert verdict.off == ("not warmer: warmth went from 150 to 80",)
    assert matches("cooler", before, warmer).ok
    assert not matches("make it brighter", warmer, before).ok
    assert matches("dunkler", warmer, before).ok
    # A change below the threshold is no change.
    same = read(_solid((202, 150, 120)))
    assert not matches("warmer", same, before).ok


def test_matches_a_brief_against_one_picture() -> None:
    blue = read(_bytes(Image.new("RGB", (1024, 768), (40, 90, 200))))
    assert matches("a blue fox, 1024x768", blue).ok
    assert matches("ein blauer Fuchs", blue).ok
    assert matches("kühl und dunkel, ohne Rot", blue).ok
    verdict = matches("a warm orange fox, bright, 512x512", blue)
    assert verdict.off == (
        "no orange to be seen (cool blue, dark)",
        "not warm: warmth is -160",
        "not bright: brightness is 88",
        "1024×768, not 512×512",
    )


def test_the_simulators_pictures_meet_their_briefs(tmp_path: Path) -> None:
    fox = read(_sim("a blue fox", tmp_path))
    assert fox.names[0] == "blue" and (fox.width, fox.height) == (320, 240)
    assert matches("a blue fox", fox).ok
    poster = read(_sim("Retro brand poster, sunset orange: a cafe", tmp_path))
    warmer = read(_sim("The chosen retro poster, a bit warmer: more orange and red", tmp_path))
    assert matches("a bit warmer: more orange and red", warmer, poster).ok
    assert compare(poster, warmer)["warmth"] > 20
    darker = read(_sim("Retro brand poster, sunset orange: a cafe, darker", tmp_path))
    assert matches("darker", darker, poster).ok
    assert not matches("brighter", darker, poster).ok
    # A darker orange is what a person calls brown.
    assert describe(darker) == "320×240, mostly warm brown, dark"
    assert describe(poster) == "320×240, mostly warm orange, bright"
