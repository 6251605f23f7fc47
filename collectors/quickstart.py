"""The quickstart job (``make run``): sweep a scratch file in the data directory and train.

Each step reuses what is already there: a finished identical sweep is not measured again
(:func:`~collectors.sweep.run.run_sweep` finds it by its key), and a model trained on exactly
the device's complete sweeps is not trained again.
"""

from __future__ import annotations

from collections.abc import Callable

from collectors.plans.presets import Plan
from collectors.sweep.run import Progress, run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.store import DataDir, Sweep
from modeling.training.train import train_device

TrainProgress = Callable[[str, float], None]


def scratch_settings(datadir: DataDir, device: str, *, size: str, runtime: str,
                     fio: str | None = None) -> SweepSettings:
    """Settings of a sweep of the scratch file ``<data directory>/scratch/<device>.img``."""
    target = datadir.scratch_dir / f"{device}.img"
    settings = SweepSettings(target=str(target), runtime=runtime, size=size, fio=fio)
    datadir.scratch_dir.mkdir(parents=True, exist_ok=True)  # once the settings are known good
    return settings


def sweep_scratch(datadir: DataDir, device: str, plan: Plan, settings: SweepSettings,
                  progress: Progress | None = None) -> Sweep:
    """Sweep the scratch file (an ``ssd`` device recorded as a scratch file); resumable."""
    return run_sweep(datadir, device, plan, settings,
                     metadata={"kind": "scratch file", "target": settings.target}, progress=progress)


def train_unless_current(datadir: DataDir, device: str, *, folds: int, time_budget_s: float,
                         progress: TrainProgress | None = None) -> tuple[str, bool]:
    """The model version to use and whether it was reused.

    The active version is reused when it was trained on exactly the device's complete
    sweeps; otherwise a new version is trained and activated.
    """
    catalog = datadir.catalog
    sweep_ids = sorted(s.id for s in catalog.list_sweeps(device) if s.status == "complete")
    active = catalog.active_model_version(device)
    if active is not None and sorted(active.manifest.get("data", {}).get("sweep_ids", [])) == sweep_ids:
        return active.version, True
    trained = train_device(datadir, device, folds=folds, time_budget_s=time_budget_s, progress=progress)
    return trained.version, False
