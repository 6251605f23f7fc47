"""Traces: parse, characterise, capture, replay and validate real block I/O traces."""
