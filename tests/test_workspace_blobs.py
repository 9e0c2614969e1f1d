"""Asset byte stores: the directory (embedded) and the S3-compatible store (production)
behind one interface; the S3 signer checked against AWS's published example; a slow bucket
stalls only the call waiting on it, never the event loop."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path

import pytest
from fastapi import FastAPI, Request, Response
from pydantic import SecretStr

from lomo.errors import ConfigError, NotFound
from lomo.settings import Settings
from tests.helpers import ThreadServer
from workspace import media
from workspace.blobs import (
    AssetStore,
    BlobStore,
    S3AssetStore,
    blob_key,
    make_asset_store,
    sigv4_authorization,
)

ACCESS, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_sigv4_matches_the_aws_s3_get_object_example() -> None:
    # "Example: GET Object" of the S3 documentation (header-based Signature Version 4).
    auth = sigv4_authorization(
        method="GET",
        path="/test.txt",
        headers={
            "Host": "examplebucket.s3.amazonaws.com",
            "Range": "bytes=0-9",
            "x-amz-content-sha256": EMPTY_SHA256,
            "x-amz-date": "20130524T000000Z",
        },
        payload_sha256=EMPTY_SHA256,
        access_key=ACCESS,
        secret_key=SECRET,
        region="us-east-1",
        amz_date="20130524T000000Z",
    )
    assert auth == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    )


def s3_standin(secret: str) -> tuple[FastAPI, dict[str, bytes]]:
    """A minimal path-style S3 server that checks each request's signature and body hash."""
    objects: dict[str, bytes] = {}
    app = FastAPI()

    @app.api_route("/{bucket}/{key:path}", methods=["GET", "PUT", "DELETE"])
    async def obj(bucket: str, key: str, request: Request) -> Response:
        body = await request.body()
        h = request.headers
        if hashlib.sha256(body).hexdigest() != h.get("x-amz-content-sha256"):
            return Response(status_code=400, content=b"XAmzContentSHA256Mismatch")
        signed = h["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        expected = sigv4_authorization(
            method=request.method,
            path=request.url.path,
            headers={n: h[n] for n in signed},
            payload_sha256=h["x-amz-content-sha256"],
            access_key=ACCESS,
            secret_key=secret,
            region="eu-central-1",
            amz_date=h["x-amz-date"],
        )
        if h["authorization"] != expected:
            return Response(status_code=403, content=b"SignatureDoesNotMatch")
        path = f"{bucket}/{key}"
        if request.method == "PUT":
            objects[path] = body
            return Response(status_code=200)
        if request.method == "DELETE":
            objects.pop(path, None)
            return Response(status_code=204)
        if path not in objects:
            return Response(status_code=404)
        return Response(objects[path], media_type="application/octet-stream")

    return app, objects


async def _roundtrip(store: BlobStore) -> None:
    key = await store.put("obj_1", 2, b"\x89PNG fake", "image/png")
    assert key == "obj_1/v2.png"
    assert await store.get(key) == b"\x89PNG fake"
    await store.delete(key)
    await store.delete(key)  # deleting again is no error (purges may run twice)
    with pytest.raises(NotFound):
        await store.get(key)


async def test_directory_store(tmp_path: Path) -> None:
    await _roundtrip(AssetStore(tmp_path))


async def test_s3_store_against_a_signature_checking_server() -> None:
    app, objects = s3_standin(SECRET)
    with ThreadServer(app) as srv:
        store = S3AssetStore(srv.url, "lomo-assets", ACCESS, SECRET, "eu-central-1")
        await store.put("obj_9", 1, b"bytes", "video/mp4")
        assert objects == {"lomo-assets/obj_9/v1.mp4": b"bytes"}
        await _roundtrip(store)
        wrong = S3AssetStore(srv.url, "lomo-assets", ACCESS, "not-the-secret", "eu-central-1")
        with pytest.raises(Exception, match="403"):
            await wrong.put("obj_9", 2, b"x", "video/mp4")


def gated_s3(gate: threading.Event, arrived: threading.Event, seen: list[bool]) -> FastAPI:
    """An S3 server that holds every request until `gate` opens (or 10 s pass) and records
    whether it was opened: it is opened only by a coroutine on the caller's event loop."""
    app = FastAPI()

    @app.api_route("/{bucket}/{key:path}", methods=["GET", "PUT", "DELETE"])
    def obj(bucket: str, key: str) -> Response:  # sync: uvicorn runs it in a thread
        arrived.set()
        seen.append(gate.wait(timeout=10))
        return Response(b"bytes", status_code=200)

    return app


@pytest.mark.parametrize("op", ["put", "get", "delete"])
async def test_a_slow_bucket_does_not_block_the_event_loop(op: str) -> None:
    """While the bucket holds the request, another coroutine on the same loop must run and
    open the gate. A store that called a blocking client on the loop would hold the loop
    until the server gave up waiting, and the server would record a gate never opened."""
    gate, arrived = threading.Event(), threading.Event()
    seen: list[bool] = []

    async def open_gate_when_the_request_is_in() -> None:
        await asyncio.to_thread(arrived.wait, 10)
        gate.set()

    with ThreadServer(gated_s3(gate, arrived, seen)) as srv:
        store = S3AssetStore(srv.url, "lomo-assets", ACCESS, SECRET, "eu-central-1")
        call = {
            "put": lambda: store.put("obj_1", 1, b"x", "image/png"),
            "get": lambda: store.get("obj_1/v1.png"),
            "delete": lambda: store.delete("obj_1/v1.png"),
        }[op]
        await asyncio.gather(call(), open_gate_when_the_request_is_in())
    assert seen == [True]


async def test_the_directory_store_writes_off_the_loop(tmp_path: Path) -> None:
    """The disk write runs in a thread: a write held inside it leaves the loop free."""
    gate, entered = threading.Event(), threading.Event()
    store = AssetStore(tmp_path)
    real = store._write
    opened: list[bool] = []

    def held_write(path: Path, data: bytes) -> None:
        entered.set()
        opened.append(gate.wait(timeout=10))
        real(path, data)

    store._write = held_write  # type: ignore[method-assign]

    async def opener() -> None:
        await asyncio.to_thread(entered.wait, 10)
        gate.set()

    await asyncio.gather(store.put("obj_1", 1, b"x", "image/png"), opener())
    assert opened == [True]
    assert await store.get("obj_1/v1.png") == b"x"


def test_every_uploadable_media_type_keeps_its_extension() -> None:
    for media_type in media.ALLOWED:
        key = blob_key("obj_1", 1, media_type)
        assert not key.endswith(".bin"), media_type
    assert blob_key("obj_1", 1, "Image/JPEG; q=1") == "obj_1/v1.jpg"
    assert blob_key("obj_1", 1, "application/x-unknown") == "obj_1/v1.bin"


def test_settings_choose_the_store(tmp_path: Path) -> None:
    assert isinstance(make_asset_store(Settings(data_dir=tmp_path)), AssetStore)
    s3 = Settings(
        data_dir=tmp_path,
        s3_endpoint_url="http://127.0.0.1:9000",
        s3_access_key=SecretStr(ACCESS),
        s3_secret_key=SecretStr(SECRET),
    )
    store = make_asset_store(s3)
    assert isinstance(store, S3AssetStore) and store.bucket == "lomo-assets"
    with pytest.raises(ConfigError):
        make_asset_store(Settings(data_dir=tmp_path, s3_endpoint_url="http://127.0.0.1:9000"))
