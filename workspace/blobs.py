"""Where asset bytes live: a directory (embedded mode) or an S3-compatible bucket
(production), behind one small interface. Keys are `{object_id}/v{version}.{ext}`.

The S3 client signs requests itself (AWS Signature Version 4 over httpx) so the project
needs no extra SDK; it uses path-style URLs, which every S3-compatible server accepts.

Every method is a coroutine that never blocks the event loop: the api and the worker serve
many requests and activities on one loop, and a slow bucket or disk must stall only the call
that waits on it. S3 goes through httpx's async client, the directory through a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx

from lomo.errors import ConfigError, NotFound
from lomo.settings import Settings
from workspace import media

# Every type the upload list accepts, and those the generation kinds produce.
_EXT = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/webp": "webp",
    "image/gif": "gif",
    "video/mp4": "mp4",
    "video/webm": "webm",
    "audio/wav": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "model/obj": "obj",
    "model/gltf-binary": "glb",
    "model/gltf+json": "gltf",
    "application/pdf": "pdf",
    "text/plain": "txt",
}


def blob_key(object_id: str, version: int, media_type: str) -> str:
    return f"{object_id}/v{version}.{_EXT.get(media.base_type(media_type), 'bin')}"


class BlobStore(ABC):
    @abstractmethod
    async def put(self, object_id: str, version: int, data: bytes, media_type: str) -> str:
        """Store the bytes of one version; returns the key to `get` them with."""

    @abstractmethod
    async def get(self, key: str) -> bytes: ...

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove the bytes; removing what is not there is no error (deletion is retried)."""


class AssetStore(BlobStore):
    """A local directory (embedded mode)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def put(self, object_id: str, version: int, data: bytes, media_type: str) -> str:
        rel = blob_key(object_id, version, media_type)
        await asyncio.to_thread(self._write, self.root / rel, data)
        return rel

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a reader never sees half a file

    async def get(self, key: str) -> bytes:
        try:
            return await asyncio.to_thread((self.root / key).read_bytes)
        except FileNotFoundError as e:
            raise NotFound(f"no bytes stored under {key}") from e

    async def delete(self, key: str) -> None:
        await asyncio.to_thread((self.root / key).unlink, missing_ok=True)


# --- S3 ------------------------------------------------------------------------------


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_authorization(
    *,
    method: str,
    path: str,
    headers: dict[str, str],
    payload_sha256: str,
    access_key: str,
    secret_key: str,
    region: str,
    amz_date: str,
    service: str = "s3",
    query: str = "",
) -> str:
    """The `Authorization` header of AWS Signature Version 4; `headers` must include host,
    x-amz-date and x-amz-content-sha256 (all of them are signed)."""
    canon = {k.lower().strip(): " ".join(v.split()) for k, v in headers.items()}
    names = sorted(canon)
    canonical_headers = "".join(f"{n}:{canon[n]}\n" for n in names)
    signed = ";".join(names)
    request = "\n".join(
        [method, quote(path, safe="/-_.~"), query, canonical_headers, signed, payload_sha256]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(request.encode()).hexdigest()]
    )
    key = _hmac(("AWS4" + secret_key).encode(), amz_date[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )


class S3AssetStore(BlobStore):
    """An S3-compatible bucket (production), over httpx's async client."""

    def __init__(
        self,
        endpoint_url: str,
        bucket: str,
        access_key: str,
        secret_key: str,
        region: str = "us-east-1",
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.endpoint = endpoint_url.rstrip("/")
        self.host = urlsplit(self.endpoint).netloc
        self.bucket = bucket
        self.access_key, self.secret_key, self.region = access_key, secret_key, region
        self.client = client or httpx.AsyncClient(timeout=60)

    async def _request(
        self, method: str, key: str, data: bytes = b"", media_type: str = ""
    ) -> httpx.Response:
        path = f"/{self.bucket}/{key}"
        amz_date = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        payload = hashlib.sha256(data).hexdigest()
        headers = {"host": self.host, "x-amz-date": amz_date, "x-amz-content-sha256": payload}
        if media_type:
            headers["content-type"] = media_type
        headers["authorization"] = sigv4_authorization(
            method=method,
            path=path,
            headers=headers,
            payload_sha256=payload,
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            amz_date=amz_date,
        )
        return await self.client.request(
            method, self.endpoint + quote(path, safe="/-_.~"), content=data, headers=headers
        )

    async def put(self, object_id: str, version: int, data: bytes, media_type: str) -> str:
        key = blob_key(object_id, version, media_type)
        (await self._request("PUT", key, data, media_type)).raise_for_status()
        return key

    async def get(self, key: str) -> bytes:
        r = await self._request("GET", key)
        if r.status_code == 404:
            raise NotFound(f"no bytes stored under {key}")
        r.raise_for_status()
        return r.content

    async def delete(self, key: str) -> None:
        r = await self._request("DELETE", key)
        if r.status_code not in (200, 204, 404):
            r.raise_for_status()


def make_asset_store(settings: Settings) -> BlobStore:
    """The store the settings ask for: S3 when an endpoint is configured, else the directory."""
    if not settings.s3_endpoint_url:
        return AssetStore(settings.resolved_asset_dir)
    if settings.s3_access_key is None or settings.s3_secret_key is None:
        raise ConfigError("LOMO_S3_ENDPOINT_URL needs LOMO_S3_ACCESS_KEY and LOMO_S3_SECRET_KEY")
    return S3AssetStore(
        settings.s3_endpoint_url,
        settings.s3_bucket,
        settings.s3_access_key.get_secret_value(),
        settings.s3_secret_key.get_secret_value(),
        settings.s3_region,
    )
