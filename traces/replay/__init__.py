"""Trace replay with fio: the iolog lanes, their clock, and the capacity of the replay path."""
