"""Run the simulator under uvicorn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import uvicorn

from sim.app import create_app


def run(
    host: str,
    port: int,
    data_dir: Path,
    callback_secret: str,
    speed: float,
    *,
    token: str,
    allowed_hosts: Sequence[str],
) -> None:
    """Serve the simulator on ``host:port`` until interrupted."""
    app = create_app(data_dir, callback_secret, speed, token=token, allowed_hosts=allowed_hosts)
    uvicorn.run(app, host=host, port=port)
