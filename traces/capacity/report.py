"""The report's capacity section: predicted latency against offered load, the target, the capacity.

Per mix (a few of the device's swept ones: reads, writes and the mixed ratio nearest 30 %
writes, at the size swept most, random), one panel: the predicted open-loop p99 (solid) and
mean (dashed) against the offered rate, up to the mix's throughput, the SLO's targets as
horizontal lines and each device's capacity under the SLO as a marker on its curve.
Several devices (the report's ``--compare``) share the panels, one colour each.  The curve
is drawn from 48 rates; the capacity itself is the search's answer, not read off the
drawing.  HTML for :func:`modeling.reporting.build_report`'s ``sections``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from html import escape

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from modeling.errors import NoModel, NotFound
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.store.open_loop_rows import closed_loop_rows
from modeling.workload import format_size
from traces.capacity.device import DeviceCapacity, curves_of, device_capacity, mix_from_mapping, mix_table
from traces.capacity.mix_latency import MixCurves
from traces.capacity.slo import Slo, format_us

DEFAULT_SLO = "p99<=1ms"
RATES = np.geomspace(1e-3, 0.995, 48)
"""Offered load drawn, as shares of a mix's throughput."""


def report_mixes(frame: pd.DataFrame) -> pd.DataFrame:
    """Up to three mixes of a device's closed-loop points: reads, ~30 % writes, writes (random,
    at the size measured most)."""
    closed = closed_loop_rows(frame)
    if closed.empty or "request_size" not in closed:
        return mix_table(
            [
                mix_from_mapping({"write_ratio": w, "request_size": 4096, "randomness": 1.0})
                for w in (0.0, 0.3, 1.0)
            ]
        )
    size = int(closed["request_size"].mode().iloc[0])
    ratios = sorted({float(w) for w in closed["write_ratio"].dropna()})
    picks = [min(ratios), min(ratios, key=lambda w: abs(w - 0.3)), max(ratios)]
    chosen = list(dict.fromkeys(picks))
    return mix_table(
        [mix_from_mapping({"write_ratio": w, "request_size": size, "randomness": 1.0}) for w in chosen]
    )


def _data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _mix_title(mix: pd.Series) -> str:
    w = float(mix["write_ratio"])
    kind = "reads" if w == 0 else "writes" if w == 1 else f"{w:.0%} writes"
    return f"{format_size(int(mix['request_size']))} random {kind}"


def figure(curves: dict[str, MixCurves], answers: dict[str, DeviceCapacity], slo: Slo) -> Figure:
    """One panel per mix; one colour per device; target lines; capacities marked."""
    first = next(iter(curves.values()))
    n = len(first.mixes)
    fig = Figure(figsize=(4.2 * n, 3.6))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for i, ax in enumerate(axes):
        for k, (device, mc) in enumerate(curves.items()):
            colour = f"C{k}"
            rates = RATES * mc.capacity(i)
            at = mc.latency(i, rates)
            ax.plot(rates, at.p99_us, color=colour, label=f"{device} p99")
            ax.plot(rates, at.mean_us, color=colour, linestyle="--", label=f"{device} mean")
            a = answers[device].answers[i]
            if a.outcome != "never":
                ax.plot([a.iops], [a.latency_p99_us], marker="o", color=colour, markersize=7)
                ax.axvline(a.iops, color=colour, linestyle=":", linewidth=1)
        for t in slo.targets:
            ax.axhline(t.limit_us, color="#cf222e", linewidth=1.2)
            ax.annotate(
                str(t),
                (0.02, t.limit_us),
                xycoords=("axes fraction", "data"),
                color="#cf222e",
                fontsize=8,
                va="bottom",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(_mix_title(first.mixes.iloc[i]), fontsize=10)
        ax.set_xlabel("offered load (IO/s, Poisson)")
        if i == 0:
            ax.set_ylabel("predicted latency (us)")
            ax.legend(fontsize=7, loc="upper left")
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.9, wspace=0.25)
    return fig


def _table(answers: dict[str, DeviceCapacity], mixes: pd.DataFrame) -> str:
    head = "".join(f"<th>{escape(_mix_title(mixes.iloc[i]))}</th>" for i in range(len(mixes)))
    rows = []
    for device, result in answers.items():
        cells = []
        for a in result.answers:
            if a.outcome == "never":
                text = f"never (lightest load p99 {format_us(a.latency_p99_us, 3)})"
            elif a.outcome == "saturation":
                text = f"{a.iops:,.0f} (saturates first)"
            elif a.outcome == "measured":
                text = f"{a.iops:,.0f} (fastest open-loop point)"
            else:
                text = f"{a.iops:,.0f} ({a.utilisation:.0%}; {escape(a.binding or '')})"
            cells.append(f"<td>{text}</td>")
        mark = "" if result.open_loop_points else " *"
        rows.append(f'<tr><td class="name">{escape(device)}{mark}</td>{"".join(cells)}</tr>')
    return f'<table><tr><th class="name">device</th>{head}</tr>{"".join(rows)}</table>'


def capacity_section(
    datadir: DataDir, devices: Sequence[str], slo: Slo, registry: ModelRegistry | None = None
) -> str:
    """The section's HTML: the mixes are the first device's; devices without a model are named."""
    registry = registry or ModelRegistry(datadir)
    mixes = report_mixes(datadir.catalog.measurements(devices[0]))
    curves: dict[str, MixCurves] = {}
    answers: dict[str, DeviceCapacity] = {}
    missing: list[str] = []
    for device in devices:
        try:
            curves[device], _ = curves_of(datadir, device, mixes, registry=registry)
            answers[device] = device_capacity(datadir, device, mixes, slo, registry=registry)
        except (NoModel, NotFound) as exc:
            missing.append(f"{escape(device)}: {escape(exc.message)}")
    parts = [
        '<section id="capacity"><h2>Capacity under a latency target</h2>',
        f'<p class="how">The most IO/s of each mix whose predicted open-loop latency meets {escape(str(slo))}'
        " (<code>ssdpredict capacity</code>): predicted p99 (solid) and mean (dashed) against offered"
        " load with Poisson arrivals, the target in red, each device's capacity marked (dot and dotted"
        " line). * no open-loop points: the latency under load is the closed-loop method's alone.</p>",
    ]
    if curves:
        parts.append(_table(answers, mixes))
        parts.append(f'<img src="{_data_uri(figure(curves, answers, slo))}" alt="latency vs offered load">')
    if missing:
        parts.append(f'<p class="note">no capacity for {"; ".join(missing)}</p>')
    parts.append("</section>")
    return "".join(parts)
