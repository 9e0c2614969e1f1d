"""The simulator's pictures follow their prompts: colour words, warmer/cooler,
brighter/darker and the subject's words, each measured here from the rendered bytes."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from sim import render
from sim.app import create_app
from tests.test_sim import ServerThread

TOKEN = "test-sim-token"


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.float64)


def _png(prompt: str, tmp_path: Path, size: tuple[int, int] = (512, 384)) -> bytes:
    params = {"prompt": prompt, "width": size[0], "height": size[1]}
    stem = f"p{abs(hash(prompt))}"
    return render.render("image", params, tmp_path, stem).read_bytes()


def warmth(px: np.ndarray) -> float:
    return float(px[..., 0].mean() - px[..., 2].mean())


def brightness(px: np.ndarray) -> float:
    return float((0.299 * px[..., 0] + 0.587 * px[..., 1] + 0.114 * px[..., 2]).mean())


def dominant_hue(px: np.ndarray) -> float:
    """The centre (degrees) of the most common 30° hue bucket among coloured pixels."""
    hsv = np.asarray(Image.fromarray(px.astype(np.uint8)).convert("HSV"), dtype=np.float64)
    coloured = hsv[(hsv[..., 1] > 60) & (hsv[..., 2] > 40)]
    degrees = coloured[:, 0] * 360 / 256
    counts = np.bincount(((degrees + 15) % 360 // 30).astype(int), minlength=12)
    return float(counts.argmax() * 30)


@pytest.mark.parametrize(
    ("plain", "warmer"),
    [
        ("a fox in the snow", "a fox in the snow, a bit warmer"),
        ("a blue fox", "a blue fox, warmer"),
        ("retro poster, teal and cream", "retro poster, teal and cream, warmer"),
        ("ein Leuchtturm am Meer", "ein Leuchtturm am Meer, etwas wärmer"),
    ],
)
def test_warmer_raises_red_minus_blue(plain: str, warmer: str, tmp_path: Path) -> None:
    base, warm = _pixels(_png(plain, tmp_path)), _pixels(_png(warmer, tmp_path))
    assert warmth(warm) >= warmth(base) + 20, (warmth(base), warmth(warm))
    cool = _pixels(_png(plain + ", cooler", tmp_path))
    assert warmth(cool) <= warmth(base) - 20
    kuehl = _pixels(_png(plain + ", kühler", tmp_path))
    assert warmth(kuehl) == pytest.approx(warmth(cool))


@pytest.mark.parametrize(
    ("plain", "darker", "brighter"),
    [
        ("a fox in the snow", "a fox in the snow, darker", "a fox in the snow, brighter"),
        ("ein grünes Feld", "ein grünes Feld, dunkler", "ein grünes Feld, heller"),
    ],
)
def test_darker_and_brighter_move_mean_brightness(
    plain: str, darker: str, brighter: str, tmp_path: Path
) -> None:
    base = brightness(_pixels(_png(plain, tmp_path)))
    assert brightness(_pixels(_png(darker, tmp_path))) <= base - 20
    assert brightness(_pixels(_png(brighter, tmp_path))) >= base + 20


@pytest.mark.parametrize(
    ("prompt", "hue"),
    [
        ("a blue fox", 210),
        ("ein blauer Fuchs", 210),
        ("a red tabby cat", 0),
        ("eine rote Katze", 0),
        ("a green meadow", 120),
        ("eine grüne Wiese", 120),
        ("ein grünes Feld", 120),
        ("hellblaues Wasser", 210),
        ("a yellow taxi", 60),
        ("a teal wave", 180),
        ("a purple plum", 270),
        ("an orange sunset over the sea", 30),
    ],
)
def test_colour_words_set_the_dominant_hue(prompt: str, hue: int, tmp_path: Path) -> None:
    assert dominant_hue(_pixels(_png(prompt, tmp_path))) == hue


def test_the_first_named_colour_covers_most_of_the_picture(tmp_path: Path) -> None:
    px = _pixels(_png("a black cat on white snow", tmp_path))
    luma = 0.299 * px[..., 0] + 0.587 * px[..., 1] + 0.114 * px[..., 2]
    assert (luma < 40).mean() > 0.5  # black first
    assert (luma > 230).mean() > 0.2  # white second


def test_the_subject_is_written_into_the_banner(tmp_path: Path) -> None:
    fox, owl = _pixels(_png("a blue fox", tmp_path)), _pixels(_png("a blue owl", tmp_path))
    differs = np.argwhere((fox != owl).any(axis=2))
    assert len(differs) > 50
    height = fox.shape[0]
    # Only the subject differs, and it sits in the banner (the bottom fifth).
    assert differs[:, 0].min() >= height * 4 // 5 - 1
    banner = fox[height * 4 // 5 :]
    assert len(np.unique(banner.reshape(-1, 3), axis=0)) > 2  # not uniform: there is text
    top = fox[: height // 10]
    assert len(np.unique(top.reshape(-1, 3), axis=0)) == 1
    assert render.subject("Generate an image of a red tabby cat, a bit warmer") == "tabby cat"
    assert render.subject("Mach ein Bild von einem roten Auto, etwas heller") == "Auto"


def test_same_prompt_same_bytes_and_different_prompts_differ(tmp_path: Path) -> None:
    a = render.render("image", {"prompt": "a blue fox"}, tmp_path / "a", "x").read_bytes()
    b = render.render("image", {"prompt": "a blue fox"}, tmp_path / "b", "x").read_bytes()
    assert a == b
    assert a != render.render("image", {"prompt": "a red fox"}, tmp_path, "y").read_bytes()


def test_video_frames_follow_the_prompt(tmp_path: Path) -> None:
    import imageio.v2 as iio

    def frames(prompt: str, stem: str) -> list[np.ndarray]:
        path = render.render("video", {"prompt": prompt, "duration_s": 1}, tmp_path, stem)
        reader = iio.get_reader(str(path))
        try:
            return [np.asarray(f, dtype=np.float64) for f in reader]
        finally:
            reader.close()

    blue, red = frames("a blue fox", "blue"), frames("a red fox", "red")
    warm = frames("a red fox, warmer", "warm")
    assert len(blue) == len(red) == 8
    assert all(dominant_hue(f) == 210 for f in blue)
    assert all(dominant_hue(f) == 0 for f in red)
    assert all(warmth(w) > warmth(r) + 20 for w, r in zip(warm, red, strict=True))
    assert not np.array_equal(blue[0], blue[-1])  # animated


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[ServerThread]:
    with ServerThread(create_app(tmp_path / "data", "s", speed=0.02, token=TOKEN)) as s:
        yield s


async def _result(client: httpx.AsyncClient, params: dict[str, Any]) -> tuple[str, bytes]:
    resp = await client.post("/jobs", json={"kind": "image", "model": "m", "params": params})
    job_id = resp.json()["job_id"]
    deadline = time.monotonic() + 20
    while (job := (await client.get(f"/jobs/{job_id}")).json())["status"] != "succeeded":
        assert job["status"] != "failed" and time.monotonic() < deadline, job
        await asyncio.sleep(0.02)
    return job["result_url"], (await client.get(job["result_url"])).content


async def test_a_revision_of_an_earlier_picture_is_warmer_than_it(sim: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as client:
        draft = {"prompt": "Retro brand poster, draft 2, teal and cream: a cafe", "width": 512}
        url, before = await _result(client, draft)
        revise = {"prompt": "The chosen poster, a bit warmer", "reference_url": url}
        _, after = await _result(client, revise)
        _, fresh = await _result(client, {"prompt": "The chosen poster, a bit warmer"})
        _, redder = await _result(
            client, {**revise, "prompt": "The chosen poster, a bit warmer: more orange and red"}
        )
    b, a = _pixels(before), _pixels(after)
    assert warmth(a) >= warmth(b) + 20, (warmth(b), warmth(a))
    assert warmth(_pixels(redder)) >= warmth(b) + 20
    # The revision keeps its source's picture: closer to it than a fresh render is.
    assert np.abs(a - b).mean() < np.abs(_pixels(fresh) - b).mean()


async def test_a_reference_outside_the_simulators_files_is_ignored(sim: ServerThread) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as client:
        _, plain = await _result(client, {"prompt": "a blue fox"})
        for ref in (f"{sim.url}/files/../jobs.json", "/etc/passwd", "http://x/files/nope.png"):
            _, got = await _result(client, {"prompt": "a blue fox", "reference_url": ref})
            assert got == plain
