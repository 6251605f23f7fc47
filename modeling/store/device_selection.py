"""Choose devices by name, glob or all: what the fleet commands and endpoints act on."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING

from modeling.errors import InvalidInput, NothingSelected
from modeling.store.names import validate_name

if TYPE_CHECKING:
    from modeling.store.files.datadir import DataDir


def select_devices(datadir: DataDir, patterns: Sequence[str] = (), *, all_devices: bool = False) -> list[str]:
    """Device names from ``--all`` or from names and globs (``ssd-*``), in catalog order.

    A plain name that is not in the catalog raises ``UnknownDevice``; a glob that matches
    nothing (or "all" of an empty catalog) raises ``NothingSelected``, so a typo never trains an
    empty fleet quietly.
    """
    known = [d.name for d in datadir.catalog.list_devices()]
    if all_devices:
        if not known:
            raise NothingSelected("the catalog has no devices yet; sweep or ingest some first")
        return known
    chosen: list[str] = []
    for pattern in patterns:
        if any(ch in pattern for ch in "*?["):
            matches = fnmatch.filter(known, pattern)
            if not matches:
                raise NothingSelected(f"no device matches {pattern!r}; see `ssdpredict devices`")
        else:
            datadir.catalog.get_device(validate_name(pattern))  # raises UnknownDevice
            matches = [pattern]
        chosen += [m for m in matches if m not in chosen]
    if not chosen:
        raise InvalidInput("name the devices: --all, or --devices with names or globs")
    return chosen
