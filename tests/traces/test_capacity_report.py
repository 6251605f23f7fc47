"""The report's capacity section: latency against offered load, the target, each device's capacity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.traces.test_capacity_fleet import fleet, fleet_root
from traces.capacity.device import device_capacity
from traces.capacity.report import capacity_section, report_mixes
from traces.capacity.slo import parse_slo

__all__ = ["fleet", "fleet_root"]


def test_the_section_marks_each_devices_capacity(fleet: DataDir) -> None:
    slo = parse_slo("p99<=600us")
    html = capacity_section(fleet, ["mid", "fast", "untrained"], slo)
    mixes = report_mixes(fleet.catalog.measurements("mid"))
    # reads, the ratio nearest 30 % writes, writes, at the size swept most (the rows' 4 KiB and 64 KiB tie:
    # pandas' mode takes the smaller)
    assert list(mixes["write_ratio"]) == [0.0, 0.5, 1.0] and set(mixes["request_size"]) == {4096}
    for device in ("mid", "fast"):
        answers = device_capacity(fleet, device, mixes, slo).answers
        row = re.search(rf'<td class="name">{device} \*</td>(.*?)</tr>', html)
        assert row, html[:2000]
        for a in answers:
            assert f"{a.iops:,.0f}" in row.group(1)
    assert html.count("data:image/png;base64,") == 1
    assert "p99&lt;=600us" in html and "no capacity for untrained" in html


@pytest.mark.slow  # the whole report (the models refitted out of fold): about 5 s
def test_report_cli_compare_overlays_devices(fleet: DataDir, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app, ["report", "-d", "mid", "--compare", "fast", "--slo", "mean<=50us", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    html = out.read_text()
    section = html[html.index('<section id="capacity">') :]
    section = section[: section.index("</section>")]
    assert '<td class="name">mid *</td>' in section and '<td class="name">fast *</td>' in section
    assert "mean&lt;=50us" in section
    res = CliRunner().invoke(app, ["report", "-d", "mid", "--slo", "p95<=1ms", "-o", str(out)])
    assert res.exit_code == 2 and "cannot target 'p95'" in res.output
