"""The REST API: FastAPI app (``main``), routes per resource, schemas, errors, jobs, metrics."""
