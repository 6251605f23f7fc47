"""Capacity of a stored device: its model and open-loop points, read once, for many mixes.

A *mix* is a workload without a load: write ratio, request size(s) and randomness.  Its
in-flight count is not chosen but follows from the offered rate (Little's law), so a
``queue_depth`` or ``numjobs`` typed into a mix is refused, and in a CSV those columns are
left out with a note (a workload CSV of ``predict --input`` may hold them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from collectors.plans.for_capacity import mix_text, planned_mixes, suggested_command
from modeling.errors import InvalidInput, NotFound
from modeling.serving.batch import read_workload_csv
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.store.catalog import read_measurement_files
from modeling.store.open_loop_rows import METHOD, OFFERED
from modeling.workload import WORKLOAD_FIELDS, Workload
from traces.capacity.ceiling import OpenLoopCeilings, open_loop_ceilings
from traces.capacity.mix_latency import MixCurves
from traces.capacity.search import CapacityAnswer, search_capacity
from traces.capacity.slo import Slo
from traces.predict.windows import DeviceCurveSource, device_source

LOAD_FIELDS = ("queue_depth", "numjobs")
"""Workload fields the offered rate decides in an open-loop question."""
MIX_FIELDS = tuple(f for f in WORKLOAD_FIELDS if f not in LOAD_FIELDS)
NEEDED_METRICS = ("iops", "latency_mean_us", "latency_p99_us")
"""What the open-loop curve of a mix is made of."""
SOURCE_COLUMNS = (*WORKLOAD_FIELDS, OFFERED, METHOD, "engine", *NEEDED_METRICS)
"""The measurement columns a device's curve source and open-loop ceilings read (the loads, the
swept mixes, the open-loop points and their correction, the replay ceilings, the engine notes):
a cold answer reads these of a device's dozens (tests/traces/test_capacity_columns.py holds its
answers equal to those from every column)."""
MAX_MIXES = 10_000
"""Mixes in one question; each costs a search."""


def _validated(values: dict[str, Any]) -> dict[str, Any]:
    """The mix's fields, defaults filled in, checked by the one Workload type."""
    try:
        w = Workload.model_validate({**values, "queue_depth": 1, "numjobs": 1})
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
        raise InvalidInput(
            "invalid workload mix: " + "; ".join(parts), details={"field": "workload"}
        ) from None
    return {k: v for k, v in w.as_row().items() if k in MIX_FIELDS}


def mix_from_mapping(values: dict[str, Any]) -> dict[str, Any]:
    """One mix from its fields (``queue_depth``/``numjobs`` refused: the rate decides them)."""
    load = [k for k in LOAD_FIELDS if values.get(k) is not None]
    if load:
        raise InvalidInput(
            f"{', '.join(load)} is set by the offered load in a capacity question; leave it out",
            details={"field": "workload"},
        )
    unknown = sorted(set(values) - set(MIX_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown workload field(s) {', '.join(unknown)}; known: {', '.join(MIX_FIELDS)}",
            details={"field": "workload"},
        )
    return _validated({k: v for k, v in values.items() if v is not None})


def parse_mix(text: str) -> dict[str, Any]:
    """A mix from ``"write_ratio=0.3,request_size=16k,randomness=1"``."""
    values: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise InvalidInput(
                f"not field=value: {part!r} in {text!r} (e.g. write_ratio=0.3,request_size=16k,randomness=1)",
                details={"field": "workload"},
            )
        values[key.strip().replace("-", "_")] = value.strip()
    if not values:
        raise InvalidInput(
            "give a workload mix, e.g. write_ratio=0.3,request_size=16k,randomness=1",
            details={"field": "workload"},
        )
    return mix_from_mapping(values)


def read_mixes(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """The mixes of a workload CSV, and a note when its load columns were left out."""
    frame = read_workload_csv(Path(path))
    if len(frame) > MAX_MIXES:
        raise InvalidInput(f"{path} holds {len(frame)} rows; at most {MAX_MIXES} mixes at once")
    notes = []
    dropped = [c for c in LOAD_FIELDS if c in frame.columns]
    if dropped:
        notes.append(f"{', '.join(dropped)} left out of {Path(path).name}: the offered rate decides the load")
    cols = [c for c in frame.columns if c in MIX_FIELDS]
    rows = []
    for n, rec in enumerate(frame[cols].to_dict(orient="records"), start=2):
        clean = {k: v for k, v in rec.items() if not pd.isna(v)}
        try:
            rows.append(_validated(clean))
        except InvalidInput as exc:
            raise InvalidInput(f"{Path(path).name} line {n}: {exc}", details={"field": "workload"}) from None
    return mix_table(rows), notes


def mix_table(mixes: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Rows of workload fields the open-loop curves take (load fields at 1: the curves set them)."""
    if not mixes:
        raise InvalidInput("give at least one workload mix", details={"field": "workload"})
    frame = pd.DataFrame([{**m, "queue_depth": 1, "numjobs": 1} for m in mixes])
    return frame[list(WORKLOAD_FIELDS)]


@dataclass
class DeviceCapacity:
    """A device's answers for every mix under one SLO."""

    device: str
    model_version: str
    slo: str
    arrival_cv2: float
    answers: list[CapacityAnswer]
    notes: list[str] = field(default_factory=list)
    open_loop_points: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "device": self.device,
            "model_version": self.model_version,
            "slo": self.slo,
            "arrival_cv2": self.arrival_cv2,
            "open_loop_points": self.open_loop_points,
            "notes": self.notes,
            "answers": [a.to_dict() for a in self.answers],
        }


def curves_of(
    datadir: DataDir,
    device: str,
    mixes: pd.DataFrame,
    arrival_cv2: float = 1.0,
    registry: ModelRegistry | None = None,
    model_version: str | None = None,
    ceiling: float = 1.0,
) -> tuple[MixCurves, str]:
    """The device's open-loop curves of ``mixes`` (one model call) and its model version.

    ``ceiling`` moves the device's throughput to that multiple of the model's, on top of the
    measured open-loop ceilings (:mod:`.ceiling`): under 1 for a load path that serves less than
    the closed-loop sweep, over 1 for one that serves more (the measured ceilings go over 1 since
    2026-11-29; :func:`traces.predict.openloop.cap_curves` extends the curve there).
    """
    if not (np.isfinite(ceiling) and ceiling > 0):
        raise InvalidInput(
            f"the ceiling must be a finite number over 0, got {ceiling}", details={"field": "ceiling"}
        )
    if not arrival_cv2 > 0 or arrival_cv2 > 1e4:
        raise InvalidInput(
            f"burstiness (the arrivals' squared coefficient of variation) must be in (0, 1e4],"
            f" got {arrival_cv2}",
            details={"field": "burstiness"},
        )
    model = (registry or ModelRegistry(datadir)).load(device, model_version)
    missing = [m for m in NEEDED_METRICS if m not in model.metrics]
    if missing:
        raise NotFound(
            f"its model {model.version} does not predict {', '.join(missing)} (no such data):"
            " the open-loop curve needs them",
            details={"device": device},
        )
    source, measured = source_and_ceilings(datadir, device, model)
    if ceiling != 1.0:
        moved = "capped at" if ceiling < 1 else "raised to"
        note = f"throughput {moved} {ceiling:.0%} of the model's (the load path's, as given)"
        source = replace(source, ceiling=ceiling, notes=[*source.notes, note])
    return with_ceilings(model, mixes, source, measured, arrival_cv2), model.version


def with_ceilings(
    model: Any,
    mixes: pd.DataFrame,
    source: DeviceCurveSource,
    measured: OpenLoopCeilings | None,
    arrival_cv2: float | np.ndarray = 1.0,
) -> MixCurves:
    """The curves of ``mixes``, capped at the open-loop path's throughput and stopped at the fastest
    open-loop point served in full (``measured``; None: the model's curves as they are)."""
    shares = None if measured is None else measured.for_mixes(mixes)
    mc = MixCurves.of(model, mixes, source, arrival_cv2, shares)
    if measured is not None:
        mc.limits = measured.limits_for(mixes)
    return mc


_SOURCES: OrderedDict[tuple[Any, ...], tuple[DeviceCurveSource, OpenLoopCeilings | None]] = OrderedDict()
_SOURCES_LOCK = threading.Lock()
SOURCE_CACHE = 1024
"""Devices whose curve source (loads, open-loop correction, swept mixes) is kept in memory."""


def cached_source(datadir: DataDir, device: str, model: Any) -> DeviceCurveSource:
    """:func:`device_source`, kept while the device's model version and measurement files stay.

    Reading a device's measurements and fitting its open-loop correction took most of an
    answer's time (a Parquet read and a fit per question); a new sweep or a retrain changes
    the key, so the cache is never stale.  Callers must not change the source they get.
    """
    return source_and_ceilings(datadir, device, model)[0]


def source_and_ceilings(
    datadir: DataDir, device: str, model: Any
) -> tuple[DeviceCurveSource, OpenLoopCeilings | None]:
    """The device's curve source and its open-loop ceilings (:mod:`.ceiling`), cached together.

    The source's notes name the ceilings.  ``capacity`` and ``trace headroom`` both answer an
    offered rate, so both take the ceilings (:func:`with_ceilings`).
    """
    files = tuple(datadir.catalog.measurement_files([device])[device])
    key = (str(datadir.root), device, model.version, files)
    with _SOURCES_LOCK:
        if key in _SOURCES:
            _SOURCES.move_to_end(key)
            return _SOURCES[key]
    frame = read_measurement_files(datadir.catalog.measurements_dir, files, SOURCE_COLUMNS)  # once, for both
    source = device_source(datadir, device, model, frame)
    measured = open_loop_ceilings(frame) if source.correction is not None else None
    if measured is not None:
        source = replace(source, notes=[*source.notes, *measured.notes()])
    with _SOURCES_LOCK:
        _SOURCES[key] = (source, measured)
        while len(_SOURCES) > SOURCE_CACHE:
            _SOURCES.popitem(last=False)
    return source, measured


def device_capacity(
    datadir: DataDir,
    device: str,
    mixes: pd.DataFrame,
    slo: Slo,
    arrival_cv2: float = 1.0,
    registry: ModelRegistry | None = None,
    model_version: str | None = None,
    ceiling: float = 1.0,
    suggest: bool = True,
) -> DeviceCapacity:
    """The largest offered IO/s of each mix on ``device`` that meets ``slo`` (see :mod:`.search`).

    ``suggest``: a note gives the ``sweep --for-capacity`` command that measures the open-loop
    points an answer lacks (:func:`sweep_suggestion`; a fleet leaves it out: it marks them).
    """
    # a mix asked twice is searched once (numpy, not a pandas MultiIndex: 7 ms of a 15 ms answer)
    rows = mixes[list(WORKLOAD_FIELDS)].to_numpy(np.float64)
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # the distinct mixes in order of appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    codes, first = rank[inverse.ravel()], first[order]
    mc, version = curves_of(datadir, device, mixes.iloc[first], arrival_cv2, registry, model_version, ceiling)
    found = [search_capacity(mc, i, slo) for i in range(len(mc.mixes))]
    answers = [found[c] for c in codes]
    measured = mc.source.correction is not None
    # without open-loop points every answer says so itself (beyond what was measured)
    notes = [n for n in mc.source.notes if measured or "no open-loop points" not in n]
    short = [a.workload for a in found if not measured or a.outcome == "measured"]
    if short and suggest:
        notes.extend(sweep_suggestion(datadir, device, short))
    return DeviceCapacity(
        device, version, str(slo), float(arrival_cv2), answers, notes, open_loop_points=measured
    )


def sweep_suggestion(datadir: DataDir, device: str, mixes: Sequence[dict[str, Any]]) -> list[str]:
    """The ``sweep --for-capacity`` command that measures what ``mixes`` lack (no open-loop points,
    or none near saturation), on the target the device was swept on; nothing when a
    ``--for-capacity`` sweep already measured every one of them (its points are what they are)."""
    sweeps = datadir.catalog.list_sweeps(device)
    done = {m for s in sweeps if s.source == "open-loop" for m in planned_mixes(s.info)}
    missing = [m for m in mixes if mix_text(m) not in done]
    if not missing:
        return []
    target = next((s.target for s in reversed(sweeps) if s.source != "open-loop" and s.target), None)
    return ["open-loop points up to and past saturation would measure what this answer rests on: "
            + suggested_command(device, target, missing)]
