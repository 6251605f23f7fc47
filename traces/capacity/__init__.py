"""Capacity under a latency target: the largest offered load whose predicted latency meets an SLO."""
