"""A what-if device in the HTML report, alone and beside the measured device it is made from."""

from __future__ import annotations

from modeling.derived.store import register_derived
from modeling.reporting import build_report
from modeling.store import DataDir


def test_report_marks_the_whatif_and_predicts_its_summary(trained: str, datadir: DataDir) -> None:
    register_derived(
        datadir, "arr", {"kind": "raid", "base": "synth", "level": 6, "members": 6, "chunk": 65536}
    )
    html = build_report(datadir, "arr")
    assert "what-if (derived, not measured) from synth: raid6 of 6" in html
    assert "no accuracy of its own" in html and "never measured: no noise floor" in html
    assert "RND4K Q32T16" in html  # the summary table, every cell from the law
    both = build_report(datadir, "synth", compare=["arr"])
    assert "ssdpredict report: synth vs arr" in both and both.count("what-if (derived, not measured)") == 1
