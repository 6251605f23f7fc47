"""``sweep --for-trace``'s closed-loop points run at the replay's priority, up to as many jobs as CPUs.

The prefix is a real command (``echo RT``) standing in for ``chrt --fifo 20`` and the fio
binary is ``echo`` (named fakes: no fio is run), so the test sees the command line each
job would run under.
"""

from __future__ import annotations

import shutil

from collectors.sweep.for_trace import closed_loop_runner


def _job(numjobs: int) -> str:
    return f"[global]\nfilename=/dev/null\n[point]\nrw=randread\nnumjobs={numjobs}\n"


def test_jobs_up_to_the_cpus_run_real_time_more_run_at_normal_priority() -> None:
    echo = shutil.which("echo")
    assert echo is not None
    run = closed_loop_runner(echo, cpus=2, prefix=[echo, "RT"])
    assert run(_job(1), timeout=10).startswith("RT ")
    assert run(_job(2), timeout=10).startswith("RT ")
    assert not run(_job(4), timeout=10).startswith("RT ")
    assert not run(_job(16), timeout=10).startswith("RT ")
    assert run("[global]\n[point]\nrw=read\n", timeout=10).startswith("RT ")  # no numjobs: one job
