"""CLI room ``learn``: train and evaluate models (one device or a fleet), their versions and report."""
