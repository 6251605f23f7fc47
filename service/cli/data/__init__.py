"""CLI room ``data``: what is stored -- ingest, devices and sweeps, export, and the catalog's health."""
