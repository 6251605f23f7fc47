"""The device report: one self-contained HTML page a storage engineer reads in seconds.

It holds what fio-plot, KDiskMark and SNIA PTS reports show -- the sweep's measured
IOPS and latency against queue depth, a KDiskMark-style summary table (measured where
swept, predicted otherwise) -- and what only a model gives: measured against predicted,
the error per workload region, interval coverage and the noise floor.  With several
devices the summary table and the curves put them side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

from modeling.errors import InvalidInput
from modeling.serving.registry import ModelRegistry
from modeling.reporting.gather import DeviceReport, gather
from modeling.reporting.page import render_report
from modeling.reporting.summary import STANDARD_TESTS, SummaryCell, summary_table
from modeling.store import DataDir

__all__ = ["STANDARD_TESTS", "DeviceReport", "SummaryCell", "build_report", "gather", "summary_table"]


def build_report(
    datadir: DataDir,
    device: str,
    compare: Sequence[str] = (),
    *,
    registry: ModelRegistry | None = None,
    sections: Sequence[str] = (),
) -> str:
    """The HTML report of ``device``, with the ``compare`` devices beside it; ``sections`` are
    HTML sections from outside modeling (the capacity section), placed after the summary.

    Raises ``UnknownDevice`` for a name not in the catalog, ``NoData`` for a device
    without measurements, ``InvalidInput`` when a device is named twice.
    """
    names = [device, *compare]
    if len(set(names)) != len(names):
        raise InvalidInput(f"a device is named more than once: {', '.join(names)}")
    registry = registry or ModelRegistry(datadir)
    return render_report([gather(datadir, name, registry=registry) for name in names], sections=sections)
