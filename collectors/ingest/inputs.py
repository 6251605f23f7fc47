"""The files of one import: found in folders, told apart (fio JSON or CSV), opened as streams."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from modeling.errors import InvalidInput, TooLarge

SUFFIX_KINDS = {".json": "fio", ".csv": "csv"}
DEFAULT_MAX_BYTES = 1 << 30
"""Default limit on the bytes of one import (``ssdpredict ingest --max-bytes``)."""


@dataclass(frozen=True)
class InputFile:
    """One file to import: how to open it, the name used in messages and rows, and its format."""

    name: str
    kind: str | None  # "fio", "csv", or None: decide from the content
    size: int
    open: Callable[[], BinaryIO]

    def head(self, n: int = 4096) -> bytes:
        """The first ``n`` bytes."""
        with self.open() as fh:
            return fh.read(n)

    def resolved_kind(self) -> str:
        """``kind``, or the kind sniffed from the content."""
        return self.kind or sniff_kind(self.head())

    def sha256(self) -> str:
        """Digest of the whole content, read in blocks."""
        digest = hashlib.sha256()
        with self.open() as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()


def file_input(path: Path, name: str, kind: str | None) -> InputFile:
    """An input read from a file on disk."""
    return InputFile(name, kind, path.stat().st_size, lambda: open(path, "rb"))


def bytes_input(data: bytes, name: str, kind: str | None = None) -> InputFile:
    """An input held in memory (an upload)."""
    return InputFile(name, kind, len(data), lambda: io.BytesIO(data))


def stream_input(stream: BinaryIO, name: str, kind: str | None = None) -> InputFile:
    """An input read from a seekable stream (an upload spooled to disk), never held whole.

    Each ``open`` reads it from the start through its own position; closing that reader
    leaves the stream open.
    """
    size = stream.seek(0, os.SEEK_END)
    return InputFile(name, kind, size, lambda: io.BufferedReader(_Rewound(stream, size), COPY_BYTES))


COPY_BYTES = 1 << 20


class _Rewound(io.RawIOBase):
    """A read-only view of a seekable stream with a position of its own."""

    def __init__(self, stream: BinaryIO, size: int) -> None:
        self._stream, self._size, self._pos = stream, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self._stream.seek(self._pos)
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def tell(self) -> int:
        return self._pos


def collect_inputs(paths: Sequence[Path], *, kinds: Sequence[str] = ("fio", "csv")) -> list[InputFile]:
    """Expand folders (recursively, ``*.json``/``*.csv``, no hidden files) into input files."""
    if not paths:
        raise InvalidInput("no input paths given")
    inputs: list[InputFile] = []
    for path in paths:
        if path.is_dir():
            found = []
            # os.walk does not follow symlinked folders, so a link loop cannot recurse forever.
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for fname in sorted(files):
                    kind = SUFFIX_KINDS.get(Path(fname).suffix.lower())
                    if fname.startswith(".") or kind not in kinds:
                        continue
                    full = Path(root) / fname
                    rel = full.relative_to(path.parent) if path.parent != path else full
                    found.append(file_input(full, rel.as_posix(), kind))
            if not found:
                wanted = " or ".join(f"*{s}" for s, k in SUFFIX_KINDS.items() if k in kinds)
                raise InvalidInput(f"{path}: no {wanted} files in this folder")
            inputs.extend(found)
        elif path.is_file():
            inputs.append(file_input(path, path.name, SUFFIX_KINDS.get(path.suffix.lower())))
        else:
            raise InvalidInput(f"{path}: no such file or folder")
    return inputs


def check_size(inputs: Sequence[InputFile], max_bytes: int | None) -> None:
    """Refuse an import over ``max_bytes`` in total, before reading any of it."""
    if max_bytes is None:
        return
    total = sum(item.size for item in inputs)
    if total > max_bytes:
        what = inputs[0].name if len(inputs) == 1 else f"{len(inputs)} files"
        raise TooLarge(
            f"{what}: {total:,} bytes is over the import limit of {max_bytes:,} bytes",
            details={"bytes": total, "max_bytes": max_bytes},
        )


def sniff_kind(data: bytes) -> str:
    """``"fio"`` when the bytes look like fio JSON output, otherwise ``"csv"``."""
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    # fio may print warning lines before its JSON; its JSON always names "fio version".
    if head.startswith(b"{") or (b"{" in head and b'"fio version"' in head):
        return "fio"
    return "csv"
