"""Claim a local target for writing: the one path that sweeps and trace replays both take.

:func:`collectors.safety.check_target` refuses a target that may hold someone's data;
the product's own scratch files (recorded in the catalog, :mod:`modeling.store.files.scratch`)
pass.  A file target is then created or grown to the size needed, only when it fits in
its filesystem's free space (:func:`collectors.safety.prepare_file`), recorded as a
scratch file when this call created it, and forgotten again if creating it failed.
"""

from __future__ import annotations

import os
from pathlib import Path

from collectors.safety import TargetInfo, check_target, prepare_file
from modeling.store.catalog import Catalog
from modeling.store.files.scratch import (
    forget_scratch_file, is_scratch_file, note_scratch_size, record_scratch_file,
)


def claim_target(target: str | Path, size: int, *, destroy_data: bool, catalog: Catalog | None) -> TargetInfo:
    """Check ``target`` and make a file target at least ``size`` bytes of real data.

    Without a ``catalog`` no file counts as the product's own and none is recorded (an
    existing non-empty file then needs ``destroy_data``).  Raises ``UnsafeTarget``,
    ``NoSpace`` or ``InvalidInput``; returns the target as checked, with a file's new size.
    """
    if catalog is None:
        info = check_target(target, destroy_data)
        if info.kind == "file":
            prepare_file(info.path, size)
    else:
        info = check_target(target, destroy_data, owned=lambda path, st: is_scratch_file(catalog, path, st))
        if info.kind == "file":
            prepare_file(info.path, size,
                         created=lambda path: record_scratch_file(catalog, path),
                         removed=lambda path: forget_scratch_file(catalog, path))
            note_scratch_size(catalog, Path(info.path))
    if info.kind == "file":
        return TargetInfo(info.path, "file", os.stat(info.path).st_size, info.details)
    return info
