"""Read measurement rows from fio JSON result files (``fio --output-format=json``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collectors.fio.results import parse_fio_output
from collectors.ingest.csv_rows import decode_text
from collectors.ingest.inputs import InputFile, collect_inputs
from modeling.errors import FioOutputError, InvalidInput


def parse_fio_text(text: str, source: str) -> list[tuple[dict[str, Any], str]]:
    """Rows (one per fio job group) of one fio JSON document, each with the raw JSON."""
    results = parse_fio_output(text, source=source)
    return [({**r.row, "job_name": r.job_name}, text) for r in results]


def parse_fio_bytes(data: bytes, source: str) -> list[tuple[dict[str, Any], str]]:
    """Like :func:`parse_fio_text` for raw bytes; non-UTF-8 input is rejected clearly."""
    if not data.strip():
        raise FioOutputError(f"{source}: empty file (expected fio JSON output)")
    try:
        text = decode_text(data, source)
    except InvalidInput as exc:
        raise FioOutputError(f"{exc} (expected fio JSON output)") from None
    return parse_fio_text(text, source)


def parse_fio_input(item: InputFile) -> list[tuple[dict[str, Any], str]]:
    """Rows and raw JSON of one input file (read whole: fio results are small)."""
    with item.open() as fh:
        data = fh.read()
    return [({**row, "source_file": item.name}, raw) for row, raw in parse_fio_bytes(data, item.name)]


def parse_fio_files(paths: Iterable[Path | str]) -> list[tuple[dict[str, Any], str]]:
    """Rows and raw JSON of fio result files; a folder contributes its ``*.json``, recursively."""
    items = collect_inputs([Path(p) for p in paths], kinds=("fio",))
    return [parsed for item in items for parsed in parse_fio_input(item)]
