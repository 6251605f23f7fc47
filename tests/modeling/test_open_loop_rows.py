"""Which stored rows are open-loop points, and which of those fio measured (the rest are the replay
path's capacity points): one rule for training, the trace correction and the open-loop probe."""

from __future__ import annotations

import numpy as np
import pandas as pd

from modeling.store.open_loop_rows import (
    METHOD, OFFERED, REPLAYED, closed_loop_rows, fio_open_loop_mask, fio_open_loop_rows, open_loop_mask,
)


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "iops": [9000.0, 400.0, 1200.0, 2000.0],
        OFFERED: [np.nan, 400.0, 1200.0, 2400.0],
        METHOD: [None, "fio", None, REPLAYED],
    }, index=[10, 11, 12, 13])


def test_fio_points_are_the_open_loop_rows_not_measured_through_the_replay():
    frame = _frame()
    assert open_loop_mask(frame).tolist() == [False, True, True, True]
    assert fio_open_loop_mask(frame).tolist() == [False, True, True, False]
    rows = fio_open_loop_rows(frame)
    assert rows[OFFERED].tolist() == [400.0, 1200.0] and rows.index.tolist() == [0, 1]
    assert closed_loop_rows(frame)["iops"].tolist() == [9000.0]


def test_without_the_columns_no_row_is_open_loop():
    frame = pd.DataFrame({"iops": [1.0, 2.0]})
    assert not fio_open_loop_mask(frame).any() and fio_open_loop_rows(frame).empty
    only_offered = frame.assign(**{OFFERED: [np.nan, 5.0]})
    assert fio_open_loop_mask(only_offered).tolist() == [False, True]
