"""Import existing measurements: fio JSON results and CSV files, all-or-nothing per import.

``ingest_paths`` takes files and folders (``ssdpredict ingest``), ``ingest_bytes`` one
uploaded file (the API).  Every file is validated before anything is stored; one bad row
or one corrupt fio result rejects the whole import with the file name, line and reason.
CSV is read in chunks, so memory stays bounded whatever the file size.
"""

from collectors.ingest.batch import ingest_bytes, ingest_paths
from collectors.ingest.csv_rows import EXTRA_METRICS, KNOWN_COLUMNS
from collectors.ingest.csv_stream import parse_csv_measurements
from collectors.ingest.fio_files import parse_fio_files
from collectors.ingest.inputs import DEFAULT_MAX_BYTES, collect_inputs, sniff_kind

__all__ = [
    "DEFAULT_MAX_BYTES",
    "EXTRA_METRICS",
    "KNOWN_COLUMNS",
    "collect_inputs",
    "ingest_bytes",
    "ingest_paths",
    "parse_csv_measurements",
    "parse_fio_files",
    "sniff_kind",
]
