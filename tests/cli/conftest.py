"""CLI fixtures: the modeling tests' synthetic device ``synth`` and its trained model.

Shared, not rewritten: a conftest that imports fixtures offers them to every test in its
folder, so the CLI tests run on exactly the data the modeling tests use.
"""

from __future__ import annotations

from tests.modeling.conftest import device_with_data, synthetic, trained, trained_template

__all__ = ["device_with_data", "synthetic", "trained", "trained_template"]
