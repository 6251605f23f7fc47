"""Every shell example of README.md and docs/*.md that this machine can run, runs (slow).

One test per file: its examples run in order (a later one may use what an earlier one
stored) with the real CLI, fio and uvicorn, on a fresh data directory, in a temporary
folder with links to the repository's test data. A block marked ``skip`` is not run and
says why; ``tests/docs/runner.py`` describes the markers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import runner

RUNNABLE = [p for p in runner.doc_files() if any(not b.skip_reason for b in runner.blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("path", RUNNABLE, ids=runner.rel)
def test_the_examples_run(path: Path, tmp_path: Path, fio_available: str) -> None:
    work, env = runner.workspace(tmp_path)
    ran = 0
    for block in runner.blocks(path):
        if block.skip_reason or block.commands() == ["make run", "make test"]:
            continue  # `make run` serves until stopped; `make test` is this suite
        outcome = runner.run_block(block, work, env)
        assert outcome.returncode == 0, (
            f"{block.where}: the example failed with exit status {outcome.returncode}\n"
            f"--- script\n{block.script()}\n--- output (last 4,000 characters)\n{outcome.output[-4000:]}")
        ran += 1
    assert ran, f"{runner.rel(path)}: no example ran"
