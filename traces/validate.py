"""Validation of a trace: per-window predicted vs measured (stub, being written)."""

from __future__ import annotations

from typing import Any

from modeling.store import DataDir


def validate_upload(
    datadir: DataDir, device: str, data: bytes, *, filename: str = "", fmt: str = "auto",
    window_s: float | None = 1.0, window_requests: int | None = None,
) -> dict[str, Any]:
    """Characterise an uploaded trace and predict each window on ``device``."""
    datadir.catalog.get_device(device)
    return {"device": device, "filename": filename, "bytes": len(data), "windows": []}
