"""Fuzzing sweep target names (issue 25, items 6, 7 and fuzz): any name is either claimed
(a file fio can take, in an existing folder) or refused with a domain error before any
side effect; never another exception, never a file or folder left behind by a refusal."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.fio.jobs import check_option
from collectors.targets import claim_target
from modeling.errors import SsdPredictError
from tests.fuzz.conftest import FUZZ

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

# names with the characters that broke sweeps (space : , quotes), path pieces and unicode
PIECES = st.sampled_from([" ", ":", ",", '"', "'", "\\", "/", "..", ".", "-", "@", "+", "=", ";",
                          "\t", "é", "€", "$", "#", "[", "*", "~", "sub/", "link"])
NAMES = st.lists(st.one_of(PIECES, st.text("abcXYZ019_", min_size=1, max_size=4)),
                 min_size=1, max_size=8).map("".join)


@FUZZ
@given(name=NAMES)
def test_any_target_name_is_claimed_or_refused_cleanly(name: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="fuzz-targets-"))
    try:
        (root / "link").symlink_to(root / "nowhere")  # a dangling symlink some names reach
        before = sorted(p.name for p in root.rglob("*"))
        target = str(root / name)
        try:
            info = claim_target(target, 4096, destroy_data=False, catalog=None)
        except SsdPredictError:
            assert sorted(p.name for p in root.rglob("*")) == before, name  # nothing left behind
            return
        # claimed: a regular file in a folder that existed, under a name fio takes
        assert os.path.isfile(info.path) and re.fullmatch(r"/[A-Za-z0-9._/+@-]+", info.path), info.path
        check_option("filename", info.path)
        assert Path(info.path).parent.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
