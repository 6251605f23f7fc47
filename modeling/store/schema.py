"""The catalog's schema, its versions (``PRAGMA user_version``), and the damage check on open.

Each entry of :data:`MIGRATIONS` takes the catalog from the previous version to the
next; a catalog is brought to :data:`SCHEMA_VERSION` in one transaction when it is
opened.  Version 1 is the original schema (a catalog created before versioning reads
``user_version`` 0 and has those tables already, hence ``IF NOT EXISTS``).

Opening also runs ``PRAGMA quick_check``: a damaged catalog (bad header, truncation,
random bytes, a damaged b-tree page) raises :class:`CatalogCorrupt` before anything is
read or written, instead of failing half-way through a command with a raw ``sqlite3``
error, or worse, succeeding and writing into it.  ``quick_check`` reads every page but
skips the index-content comparison of ``integrity_check``, which is what
``ssdpredict catalog check`` runs on demand.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from modeling.errors import CatalogCorrupt, SchemaTooNew
from modeling.store.files.readonly import read_only_reason, read_only_uri, refused

_V1 = """
CREATE TABLE IF NOT EXISTS devices (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    class TEXT NOT NULL DEFAULT 'ssd',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY,
    device_id INTEGER NOT NULL REFERENCES devices(id),
    source TEXT NOT NULL,              -- 'sweep' or 'ingest'
    plan_key TEXT,                     -- identifies a plan+target, for resuming
    plan TEXT NOT NULL DEFAULT '{}',   -- JSON: the plan's points and settings
    target TEXT,
    n_planned INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,              -- 'running' or 'complete'
    info TEXT NOT NULL DEFAULT '{}',   -- JSON: fio version, engine, kernel, ...
    parquet TEXT,                      -- path relative to the measurements folder
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX IF NOT EXISTS sweeps_device ON sweeps(device_id, status);
CREATE TABLE IF NOT EXISTS points (
    id INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
    seq INTEGER NOT NULL,              -- index of the point in the plan
    repeat INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,                -- JSON: workload fields and measured metrics
    raw BLOB,                          -- zlib-compressed raw fio JSON, for provenance
    created_at TEXT NOT NULL,
    UNIQUE (sweep_id, seq, repeat)
);
CREATE TABLE IF NOT EXISTS models (
    version TEXT PRIMARY KEY,
    device_id INTEGER NOT NULL REFERENCES devices(id),
    active INTEGER NOT NULL DEFAULT 0,
    path TEXT NOT NULL,                -- folder relative to the data directory's models/
    manifest TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS models_device ON models(device_id, active);
"""

_V2 = """
-- regular files that a sweep created as its own scratch file (so may overwrite again)
CREATE TABLE scratch_files (
    path TEXT PRIMARY KEY,             -- real path
    st_dev INTEGER NOT NULL,           -- identity of the file we created: a file put in
    st_ino INTEGER NOT NULL,           -- its place later is someone else's
    created_at TEXT NOT NULL
);
-- the service's background jobs (retrains); a job's end and the model it activated are
-- written in one transaction
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    device TEXT NOT NULL,
    state TEXT NOT NULL,               -- queued, running, succeeded, failed, interrupted
    stage TEXT,
    progress REAL NOT NULL DEFAULT 0,
    options TEXT NOT NULL DEFAULT '{}',
    result TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX jobs_state ON jobs(state);
"""

_V3 = """
-- a scratch file's size after its sweep prepared it: inode numbers are reused, so a file
-- put in place of a deleted scratch file can have its (st_dev, st_ino); it is refused
-- unless its size is also the one recorded (NULL: recorded before sizes were)
ALTER TABLE scratch_files ADD COLUMN size INTEGER;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3)
SCHEMA_VERSION = len(MIGRATIONS)

# SQLite's primary result codes for "this is not (or no longer) a valid database file"
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26


def _lenient_text(data: bytes) -> str:
    return data.decode(errors="replace")


def undecodable(exc: UnicodeDecodeError) -> str:
    """What a UnicodeDecodeError from sqlite3 was about.

    SQLite stores text as it was given, so bad UTF-8 means damage: in a stored value, or
    in the schema, in which case sqlite3 fails while decoding SQLite's own error message.
    """
    text = exc.object.decode(errors="replace") if isinstance(exc.object, bytes) else ""
    return text if text.startswith("malformed") else "a stored text is not valid UTF-8"


def is_damage(exc: BaseException) -> bool:
    """Whether a sqlite3 error means the file is damaged (not busy, not a bug in a query).

    A missing table or column is damage too: the schema was checked when the catalog was
    opened, so one gone since was dropped under the running process.
    """
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    text = str(exc)
    if text.startswith(("no such table", "no such column")):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    return "malformed" in text or "not a database" in text


_EXPECTED: dict[int, dict[str, tuple[str, ...]]] = {}


def _tables(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    names = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )]
    return {n: tuple(str(r[1]) for r in conn.execute(f'PRAGMA table_info("{n}")')) for n in names}


def expected_tables(version: int = SCHEMA_VERSION) -> dict[str, tuple[str, ...]]:
    """Tables and columns of a catalog at schema ``version`` (built from the migrations, once)."""
    version = min(max(version, 1), SCHEMA_VERSION)  # 0: created before versioning, as version 1
    if version not in _EXPECTED:
        conn = sqlite3.connect(":memory:")
        try:
            for script in MIGRATIONS[:version]:
                for statement in _statements(script):
                    conn.execute(statement)
            _EXPECTED[version] = _tables(conn)
        finally:
            conn.close()
    return _EXPECTED[version]


def schema_problems(conn: sqlite3.Connection, version: int = SCHEMA_VERSION) -> list[str]:
    """How the tables of a catalog at schema ``version`` differ from that version's (empty: none).

    SQLite's own checks pass a catalog with a dropped table or column; every command would
    then fail half-way with "no such table".  Tables or columns of a later version than
    ``user_version`` says mean the version was reset, and migrating would fail.
    """
    have = _tables(conn)
    expected = expected_tables(version)
    problems = []
    for table, columns in expected.items():
        if table not in have:
            problems.append(f"table {table} is missing")
            continue
        lost = [c for c in columns if c not in have[table]]
        if lost:
            problems.append(f"table {table} lacks column{'s' * (len(lost) > 1)} {', '.join(lost)}")
    if version < SCHEMA_VERSION:
        later = expected_tables()
        ahead = [t for t in later if t in have and t not in expected] + [
            f"{t}.{c}" for t in expected if t in have
            for c in later[t] if c in have[t] and c not in expected[t]
        ]
        if ahead:
            problems.append(f"schema version {version} but it holds {', '.join(ahead)} of a later version")
    return problems


def damaged(path: Path, detail: str) -> CatalogCorrupt:
    """The error that says the catalog is damaged and how to recover."""
    return CatalogCorrupt(
        f"the catalog ({path.name} in the data directory) is damaged: {detail}. Nothing was "
        "written. Recover with `ssdpredict catalog rebuild`, which rebuilds it from the Parquet "
        "measurements and model files and keeps the damaged file beside it",
        details={"detail": detail},
    )


def open_schema(path: Path, *, has_data: bool, read_only: str | None = None) -> None:
    """Check the catalog at ``path`` for damage and bring its schema up to date.

    ``has_data``: measurement or model files exist beside the catalog, so a missing or
    empty catalog is a lost one (not a new one) and must not be silently recreated.
    ``read_only``: why the folder cannot be written; the catalog is checked, not migrated.
    """
    if has_data and (not path.exists() or path.stat().st_size == 0):
        state = "missing" if not path.exists() else "empty (0 bytes)"
        raise damaged(path, f"it is {state} while measurements or models exist")
    if read_only is not None and not path.exists():
        raise refused(path.parent, read_only, "creating the catalog")
    if read_only is None:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    else:
        conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=30.0, isolation_level=None)
    conn.text_factory = _lenient_text  # the check's messages quote damaged bytes
    try:
        rows = conn.execute("PRAGMA quick_check(5)").fetchall()
        problems = [str(r[0]) for r in rows if r[0] != "ok"]
        if problems:
            raise damaged(path, "; ".join(problems))
        if read_only is None:
            conn.execute("PRAGMA journal_mode=WAL")
            _migrate(conn, path)
        elif _version(conn) != SCHEMA_VERSION:
            _too_new(_version(conn))
            raise refused(path.parent, read_only, f"bringing the catalog to schema version {SCHEMA_VERSION}")
        problems = schema_problems(conn)
        if problems:
            raise damaged(path, "; ".join(problems))
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(path, str(exc)) from None
        raise
    except UnicodeDecodeError as exc:
        raise damaged(path, undecodable(exc)) from None
    finally:
        conn.close()


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _too_new(version: int) -> None:
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"the catalog has schema version {version}, newer than this ssdpredict knows "
            f"({SCHEMA_VERSION}); upgrade ssdpredict",
            details={"schema_version": version, "supported": SCHEMA_VERSION},
        )


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = _version(conn)
    _too_new(version)
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # another process may have migrated while we waited for the write lock
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _statements(MIGRATIONS[number - 1]):
                try:
                    conn.execute(statement)
                except sqlite3.OperationalError as exc:
                    # e.g. "table scratch_files already exists": user_version does not match
                    # the tables, so the file is not what its version says
                    raise damaged(
                        path, f"its schema does not match its version ({version}): {exc}"
                    ) from None
            conn.execute(f"PRAGMA user_version = {number}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit mid-way)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def integrity_problems(path: Path) -> list[str]:
    """What ``PRAGMA integrity_check`` finds wrong with the catalog (empty: nothing).

    A catalog in a folder that cannot be written is read without creating files beside it:
    not being able to write is not damage.
    """
    if not path.exists() or path.stat().st_size == 0:
        return ["the catalog file is missing or empty"]
    try:
        uri = f"file:{path}?mode=ro" if read_only_reason(path.parent) is None else read_only_uri(path)
        conn = sqlite3.connect(uri, uri=True, timeout=30.0)
        conn.text_factory = _lenient_text
        try:
            rows = conn.execute("PRAGMA integrity_check(20)").fetchall()
            problems = [str(r[0]) for r in rows if r[0] != "ok"]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if not problems and version <= SCHEMA_VERSION:
                problems = schema_problems(conn, version)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    except UnicodeDecodeError as exc:
        return [undecodable(exc)]
    return problems
