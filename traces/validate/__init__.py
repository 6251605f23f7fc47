"""Trace validation: predicted against replayed per window, the device check, the PNG."""
