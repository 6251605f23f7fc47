"""The open-loop phase of ``ssdpredict sweep`` under kill -9: every point is stored as it is
measured, a rerun measures only the missing ones, and progress shows without a terminal."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modeling.store import DataDir

REPO = Path(__file__).resolve().parents[2]
SWEEP = ["sweep", "--device", "d", "--runtime", "1s", "--size", "16MiB", "--plan", "grid",
         "--write-ratios", "0", "--queue-depths", "1", "--sizes", "4k", "--randomness", "1",
         "--open-loop", "0.01,0.02,0.03,0.04,0.05", "--open-loop-requests", "100"]


def _counting_fio(tmp_path: Path, fio: str) -> tuple[Path, Path]:
    """Real fio behind a shell script that logs each open-loop (Poisson) job it is given."""
    log = tmp_path / "openloop-runs.log"
    shim = tmp_path / "fio"
    shim.write_text(
        "#!/bin/sh\n"
        'for a; do last="$a"; done\n'
        f'if [ -r "$last" ] && grep -q rate_process=poisson "$last"; then echo run >> {log}; fi\n'
        f'exec {fio} "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    return shim, log


def _open_loop_sweep(catalog):  # type: ignore[no-untyped-def]
    if not any(d.name == "d" for d in catalog.list_devices()):
        return None
    return next((s for s in catalog.list_sweeps("d") if s.source == "open-loop"), None)


def _stamps(catalog, sweep_id: int) -> dict[int, str]:  # type: ignore[no-untyped-def]
    with catalog.connect() as conn:
        rows = conn.execute("SELECT seq, created_at FROM points WHERE sweep_id = ?", (sweep_id,)).fetchall()
    return {int(r["seq"]): str(r["created_at"]) for r in rows}


@pytest.mark.slow
@pytest.mark.fio
def test_sigkill_in_the_open_loop_phase_keeps_its_points(home: Path, tmp_path: Path,
                                                         fio_available: str) -> None:
    shim, log = _counting_fio(tmp_path, fio_available)
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "SSDPREDICT_FIO": str(shim)}
    cmd = [sys.executable, "-m", "service.cli.main", *SWEEP, "--target", str(tmp_path / "t.img")]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    catalog = DataDir(home).catalog
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        ol = _open_loop_sweep(catalog)
        if ol is not None and ol.n_points >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read()!r}"  # type: ignore[union-attr]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed = _open_loop_sweep(catalog)
    assert killed is not None and killed.status == "running"
    kept, planned = killed.n_points, killed.n_planned
    assert 2 <= kept < planned
    before = _stamps(catalog, killed.id)
    runs_before = len(log.read_text().splitlines())
    assert runs_before >= kept

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=REPO)
    assert done.returncode == 0, done.stderr
    # stderr is a pipe here, not a terminal: plain progress lines, with the resume said first
    assert f"resuming the open-loop points: {kept} of {planned} already stored" in done.stderr
    assert f"open-loop points {planned}/{planned}, elapsed" in done.stderr and "ETA" in done.stderr
    finished = _open_loop_sweep(catalog)
    assert finished is not None and finished.id == killed.id and finished.status == "complete"
    assert finished.n_points == planned
    after = _stamps(catalog, killed.id)
    assert {seq: after[seq] for seq in before} == before  # the stored points were not measured again
    assert len(log.read_text().splitlines()) - runs_before == planned - kept
    frame = catalog.measurements("d")
    assert frame["offered_iops"].notna().sum() == planned

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert again.returncode == 0, again.stderr
    assert len(log.read_text().splitlines()) - runs_before == planned - kept  # nothing measured
