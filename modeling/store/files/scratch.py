"""Scratch files a sweep created itself, recorded in the catalog so it may write them again.

A sweep overwrites its target. A regular file that already exists is refused unless the
product created it as its own scratch file: the catalog records the file's real path and
its identity (``st_dev``, ``st_ino``) when the sweep creates it. The identity matters:
if the scratch file is deleted and someone puts their own file at that path, the inode
differs and the new file is refused. Inode numbers are reused, though (a file written
right after the scratch file was deleted often gets its number), so the size the sweep
left the file at is recorded too, and a file of another size is refused as well. Why the
catalog and not an extended attribute on the file: ``cp -a`` and backup tools copy
xattrs onto the user's copies, and some filesystems (older tmpfs, many NFS setups)
refuse user xattrs; the catalog is already the one record of what the product owns.
Files directly in the data directory's ``scratch/`` folder are the product's too. Losing
the catalog fails closed (the file is refused until ``--destroy-data``), never open.
"""

from __future__ import annotations

import os
from pathlib import Path

from modeling.store.catalog import Catalog
from modeling.store.records import utcnow


def record_scratch_file(catalog: Catalog, path: Path) -> None:
    """Record ``path`` (just created by a sweep) as a scratch file the product may overwrite."""
    st = os.stat(path)
    with catalog.connect() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO scratch_files (path, st_dev, st_ino, created_at) VALUES (?, ?, ?, ?)",
            (str(Path(path).resolve()), st.st_dev, st.st_ino, utcnow()),
        )


def note_scratch_size(catalog: Catalog, path: Path) -> None:
    """Record the size a sweep left its own scratch file at (no-op for any other file)."""
    st = os.stat(path)
    with catalog.connect() as conn:
        conn.execute(
            "UPDATE scratch_files SET size = ? WHERE path = ? AND st_dev = ? AND st_ino = ?",
            (st.st_size, str(Path(path).resolve()), st.st_dev, st.st_ino),
        )


def is_scratch_file(catalog: Catalog, path: Path, st: os.stat_result) -> bool:
    """Whether ``path`` is the very file a sweep created as its scratch file.

    Files directly in the data directory's ``scratch/`` folder are the product's by
    definition (``make run`` put them there before files were recorded).
    """
    if Path(path).resolve().parent == (catalog.path.parent / "scratch").resolve():
        return True
    with catalog.connect() as conn:
        row = conn.execute(
            "SELECT st_dev, st_ino, size FROM scratch_files WHERE path = ?", (str(Path(path).resolve()),)
        ).fetchone()
    if row is None or (row["st_dev"], row["st_ino"]) != (st.st_dev, st.st_ino):
        return False
    return row["size"] is None or row["size"] == st.st_size


def forget_scratch_file(catalog: Catalog, path: Path) -> None:
    """Forget a scratch file (it was removed after a failure)."""
    with catalog.connect() as conn:
        conn.execute("DELETE FROM scratch_files WHERE path = ?", (str(Path(path).resolve()),))
