"""Batch prediction of a CSV of workloads (ingest CSV columns) into a CSV of predictions."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from modeling.errors import InvalidInput
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import SIZE_FIELDS, parse_size


def read_workload_csv(path: Path) -> pd.DataFrame:
    """Rows of a workload CSV (at least one); size columns may use suffixes such as ``16k``."""
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise InvalidInput(f"no such file: {path}") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InvalidInput(f"cannot read {path} as CSV: {exc}") from exc
    for name in SIZE_FIELDS & set(frame.columns):
        # any text column (object, or pandas' string dtype): "16k" is a size as on the command line
        if not pd.api.types.is_numeric_dtype(frame[name]):
            try:
                frame[name] = [None if pd.isna(v) else parse_size(str(v)) for v in frame[name]]
            except ValueError as exc:
                raise InvalidInput(f"column {name!r}: {exc}", details={"field": name}) from None
    if frame.empty:
        raise InvalidInput(f"{path} holds no rows")
    return frame


def predict_csv(
    datadir: DataDir, device: str, path: Path, *, model: str = "auto", version: str | None = None
) -> pd.DataFrame:
    """The input rows followed by ``pred_<metric>`` (and interval, flag, model) columns."""
    frame = read_workload_csv(Path(path))
    dm = ModelRegistry(datadir).load(device, version)
    preds = dm.predict_frame(frame, model=model)
    return pd.concat([frame, preds], axis=1)
