"""Choose devices by name, glob or all: what the fleet commands and endpoints act on."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import TYPE_CHECKING

from modeling.errors import InvalidInput, NothingSelected, UnknownDevice
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
    chosen: dict[str, None] = {}  # in order, each once
    names = set(known)
    # from the one listing: a catalog query per name took 10 s for 10,000 names (schemathesis)
    for pattern in dict.fromkeys(patterns):
        if any(ch in pattern for ch in "*?["):
            matches = fnmatch.filter(known, pattern)
            if not matches:
                raise NothingSelected(f"no device matches {pattern!r}; see `ssdpredict devices`")
        else:
            if validate_name(pattern) not in names:
                raise UnknownDevice(pattern)
            matches = [pattern]
        chosen.update(dict.fromkeys(matches))
    if not chosen:
        raise InvalidInput("name the devices: --all, or --devices with names or globs")
    return list(chosen)
