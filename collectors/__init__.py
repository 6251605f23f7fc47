"""Collectors: sweep the workload space of a device with fio, or import existing results."""
