"""Sweep plans: presets (quick, pts, grid, lhs, adaptive, ...) and TOML plan files."""
