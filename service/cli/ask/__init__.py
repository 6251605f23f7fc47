"""CLI room ``ask``: predictions from the trained models, for one device or ranked across many."""
