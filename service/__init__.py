"""Service: the user-facing surfaces, the REST API (service.api) and the CLI (service.cli)."""
