"""Training: model selection, fitting, the train operation, evaluation and adaptive sampling."""

MIN_ROWS = 8
"""Fewest distinct measured workloads a device needs to be trained (here, light to import: a
sweep's plan checks it without loading the estimators)."""
