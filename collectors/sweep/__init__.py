"""Running a sweep: settings, the point loop, per-class measurement, quality, open-loop points, many hosts."""
