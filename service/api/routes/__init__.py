"""One router module per resource; ``service.api.main`` includes them all."""
