"""Modeling: the shared workload type, the data directory, and per-device regression models."""
