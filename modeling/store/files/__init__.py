"""The data directory's files: paths, atomic writes, Parquet metadata, scratch files, locks, work folders."""
