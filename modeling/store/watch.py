"""A cheap way for a long-running reader to notice catalog changes made by other processes.

``PRAGMA data_version`` on one long-lived connection changes whenever any *other*
connection has committed since the last time it was asked; asking costs a few
microseconds and reads no table.  Serving replicas that share a data directory use it to
pick up versions that another replica, a CLI or a fleet training activated.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from modeling.store.files.readonly import read_only_reason, read_only_uri
from modeling.store.schema import damaged, is_damage, undecodable



class _NewCatalog(Exception):
    """The catalog file exists but its tables do not yet."""


class CatalogWatch:
    """One read-only use of the catalog: has it changed, and which versions are active."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._seen: int | None = None

    def changed(self) -> bool:
        """True on the first call and whenever another connection committed since the last call."""
        with self._lock:
            if self._conn is None and not self.path.exists():
                return True  # no catalog yet: nothing to read, and no empty file made by asking
            with self._damage_named():
                version = int(self._connection().execute("PRAGMA data_version").fetchone()[0])
            changed = version != self._seen
            self._seen = version
            return changed

    def active_versions(self) -> dict[str, str]:
        """Every device's active model version, in one query (a plain read, no write lock)."""
        with self._lock:
            if self._conn is None and not self.path.exists():
                return {}
            try:
                with self._damage_named(tolerate_new=True):
                    rows = (
                        self._connection()
                        .execute(
                            "SELECT d.name, m.version FROM models m JOIN devices d ON d.id = m.device_id"
                            " WHERE m.active = 1"
                        )
                        .fetchall()
                    )
            except _NewCatalog:
                return {}  # a catalog being created by another process: no versions yet
        return {str(name): str(version) for name, version in rows}

    def close(self) -> None:
        """Close the connection (it reopens on the next call)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _damage_named(self, *, tolerate_new: bool = False) -> Iterator[None]:
        """sqlite3's errors about a damaged file as ``CatalogCorrupt`` (one line, not a traceback)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if tolerate_new and str(exc).startswith("no such table") and self._is_being_created():
                raise _NewCatalog from None
            if is_damage(exc):
                raise damaged(self.path, str(exc)) from None
            raise
        except UnicodeDecodeError as exc:
            raise damaged(self.path, undecodable(exc)) from None

    def _is_being_created(self) -> bool:
        """No table at all yet: another process has just created the file."""
        assert self._conn is not None
        return self._conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            # autocommit, so each statement reads the latest committed state rather than
            # a snapshot held open by an implicit transaction
            if read_only_reason(self.path.parent) is None:
                self._conn = sqlite3.connect(
                    self.path, timeout=30.0, isolation_level=None, check_same_thread=False
                )
            else:  # a read-only data directory: no -shm file can be made beside the catalog
                self._conn = sqlite3.connect(
                    read_only_uri(self.path), uri=True, timeout=30.0, isolation_level=None,
                    check_same_thread=False,
                )
        return self._conn
