"""Serving: the fitted device model, its storage registry and the predict operations."""
