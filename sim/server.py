"""Run the simulator under uvicorn."""

from __future__ import annotations

from pathlib import Path

import uvicorn

from sim.app import create_app


def run(host: str, port: int, data_dir: Path, callback_secret: str, speed: float) -> None:
    """Serve the simulator on ``host:port`` until interrupted."""
    uvicorn.run(create_app(data_dir, callback_secret, speed), host=host, port=port)
