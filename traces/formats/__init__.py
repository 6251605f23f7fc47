"""One module per trace format; each exposes ``read(path, chunk_requests) -> Trace``."""
