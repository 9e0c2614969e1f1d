"""The event bell across processes on one host (docs/architecture.md#events).

`lomo/events.py` rings a per-person bell when a transaction that appended events commits;
it wakes the SSE streams of the same process only. The worker is another process, so by
their poll alone the api's streams would find its events (a reply, a task's status) every
`sse_poll_seconds` (0.25 s): up to a quarter second late, 125 ms on average.

Here each process that serves streams listens on a Unix datagram socket in `bell_dir`
(inside the data directory), and a committing process sends the persons' ids to every
socket there but its own. It is best-effort on purpose: the event log is the source of
truth, so a datagram that is lost (a full buffer, a listener restarting, a socket not yet
listed) costs only the poll's delay, never an event; sending never blocks a commit.

Limits: processes must share the data directory's filesystem (one host, or containers
sharing a volume); across hosts Postgres `LISTEN/NOTIFY` would carry the bell (not built).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

# Linux's limit for a socket path (sun_path, 108 bytes with its terminating NUL).
MAX_PATH = 107
# A new listener is found by senders within this long (the directory is listed again).
RELIST_SECONDS = 1.0
# One datagram carries ids up to this size; more persons in one commit send several.
MAX_DATAGRAM = 4096
SUFFIX = ".sock"
# Where a session finds the relay its commits send through (`Database(relay=...)`).
SESSION_KEY = "lomo.bell_relay"


class BellRelay:
    """Sends rings to the other processes' listeners in `directory`, and (after `listen`)
    receives theirs, handing each person's id to `ring`."""

    def __init__(self, directory: Path, ring: Callable[[str], None]) -> None:
        self.directory = directory
        self.ring = ring
        self._out: socket.socket | None = None
        self._peers: list[str] = []
        self._listed_at = -RELIST_SECONDS
        self._in: socket.socket | None = None
        self._own: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- sending (any process that commits events) ---------------------------------------
    def send(self, user_ids: Iterable[str]) -> None:
        """Called after a commit; never raises, never blocks."""
        try:
            peers = self.peers()
            if not peers:
                return
            for payload in _datagrams(user_ids):
                for path in peers:
                    self._send_one(payload, path)
        except Exception:  # a wake-up is an optimization: the commit stands regardless
            log.debug("bell relay: send failed", exc_info=True)

    def _send_one(self, payload: bytes, path: str) -> None:
        if self._out is None:
            self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._out.setblocking(False)
        try:
            self._out.sendto(payload, path)
        except BlockingIOError:
            pass  # the listener's buffer is full: its poll finds the events
        except (ConnectionRefusedError, FileNotFoundError):
            # Nobody listens there any more (a process that died without cleaning up).
            self._peers = [p for p in self._peers if p != path]
            with contextlib.suppress(OSError):
                os.unlink(path)

    def peers(self) -> list[str]:
        """The other listeners' sockets (listed again after `RELIST_SECONDS`)."""
        now = time.monotonic()
        if now - self._listed_at >= RELIST_SECONDS:
            self._listed_at = now
            try:
                names = os.listdir(self.directory)
            except FileNotFoundError:
                names = []
            self._peers = [
                str(self.directory / n)
                for n in names
                if n.endswith(SUFFIX) and str(self.directory / n) != self._own
            ]
        return self._peers

    # --- listening (a process that serves event streams) ---------------------------------
    def listen(self) -> bool:
        """Start receiving on the running loop; False (and the poll alone) where no socket
        can be made there (a path too long for the platform, a directory not writable)."""
        path = str(self.directory / f"{os.getpid()}-{secrets.token_hex(3)}{SUFFIX}")
        if len(path.encode()) > MAX_PATH:
            log.warning("bell relay: %s is too long for a socket; streams poll only", path)
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            sock.setblocking(False)
            sock.bind(path)
        except OSError as e:
            sock.close()
            log.warning("bell relay: cannot listen at %s (%s); streams poll only", path, e)
            return False
        self._in, self._own, self._loop = sock, path, asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._receive)
        self._listed_at = -RELIST_SECONDS  # the own socket is left out from now on
        return True

    @property
    def listening(self) -> str | None:
        return self._own

    def _receive(self) -> None:
        assert self._in is not None
        while True:
            try:
                data = self._in.recv(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.debug("bell relay: receive failed", exc_info=True)
                return
            for user_id in data.decode(errors="replace").split("\n"):
                if user_id:
                    self.ring(user_id)

    def close(self) -> None:
        if self._in is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._in.fileno())
            self._in.close()
            self._in = None
        if self._own is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._own)
            self._own = None
        if self._out is not None:
            self._out.close()
            self._out = None


def _datagrams(user_ids: Iterable[str]) -> list[bytes]:
    out: list[bytes] = []
    current = b""
    for user_id in user_ids:
        b = user_id.encode()
        if current and len(current) + 1 + len(b) > MAX_DATAGRAM:
            out.append(current)
            current = b""
        current = current + b"\n" + b if current else b
    if current:
        out.append(current)
    return out
