"""Settings of the fuzz suite: N examples per target, from SSDPREDICT_FUZZ_EXAMPLES (default 100)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES = int(os.environ.get("SSDPREDICT_FUZZ_EXAMPLES", "100"))

settings.register_profile(
    "fuzz",
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
FUZZ = settings.get_profile("fuzz")
