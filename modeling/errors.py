"""Domain errors shared by every package.

Domain code raises these and knows nothing of HTTP or the CLI.  Each error has a ``kind``
(what sort of failure it is) and a stable ``code`` (a machine-readable name).  The service
maps ``kind`` to an HTTP status in one exception handler; the CLI prints ``str(error)`` as
a one-line message and exits with status 2.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SsdPredictError(Exception):
    """Base class of every error the domain raises on purpose."""

    kind: ClassVar[str] = "error"
    code: ClassVar[str] = "error"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidInput(SsdPredictError):
    """Input that cannot be used: a bad value, file or request."""

    kind = "invalid"
    code = "invalid_input"


class UnknownDevice(SsdPredictError):
    """No device of that name is in the catalog."""

    kind = "not_found"
    code = "unknown_device"

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown device {name!r}; see `ssdpredict devices` for the known ones")
        self.name = name


class NotFound(SsdPredictError):
    """A named thing (sweep, model version, job, region) does not exist."""

    kind = "not_found"
    code = "not_found"


class NoModel(SsdPredictError):
    """The device exists but has no (active) trained model yet."""

    kind = "not_found"
    code = "no_model"


class NoData(SsdPredictError):
    """There are not enough measurements to do what was asked."""

    kind = "invalid"
    code = "no_data"


class UnsafeTarget(SsdPredictError):
    """Refusal to write to a target that may hold data."""

    kind = "unsafe"
    code = "unsafe_target"


class FioMissing(SsdPredictError):
    """The fio binary is not installed."""

    kind = "unavailable"
    code = "fio_missing"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or "fio is not installed or not on PATH; install it with `apt-get install fio` "
            "(`make run` does this for you)"
        )


class FioError(SsdPredictError):
    """fio ran but failed."""

    kind = "unavailable"
    code = "fio_failed"


class FioOutputError(InvalidInput):
    """fio output (or an uploaded fio result) is not valid fio JSON."""

    code = "bad_fio_output"


class TraceFormatError(InvalidInput):
    """A trace file is corrupt, truncated or of an unknown format."""

    code = "bad_trace"


class NothingSelected(InvalidInput):
    """Names, globs or "all" chose no device: a glob that matches none, an empty catalog, only the
    reference.  Nothing was found (an API 404), though the request itself was well formed."""

    kind = "not_found"
    code = "no_device"


class Conflict(SsdPredictError):
    """The operation clashes with one already running (e.g. a second retrain)."""

    kind = "conflict"
    code = "conflict"


class TooLarge(InvalidInput):
    """Input over a configured size limit."""

    kind = "too_large"
    code = "too_large"


class CorruptModel(SsdPredictError):
    """A stored model file fails validation (tampered, foreign or damaged)."""

    kind = "invalid"
    code = "corrupt_model"


class DeviceUnavailable(SsdPredictError):
    """A device cannot be reached or attached (``nvme connect`` failed, no namespace, no tool)."""

    kind = "unavailable"
    code = "device_unavailable"


class MissingDependency(SsdPredictError):
    """An optional package a feature needs is not installed."""

    kind = "unavailable"
    code = "missing_dependency"


class ClusterUnavailable(SsdPredictError):
    """The Dask scheduler named for distributed work cannot be reached."""

    kind = "unavailable"
    code = "cluster_unavailable"
class CatalogCorrupt(SsdPredictError):
    """The SQLite catalog is damaged (or lost while measurements and models remain)."""

    kind = "unavailable"
    code = "catalog_corrupt"


class SchemaTooNew(SsdPredictError):
    """The catalog was written by a newer ssdpredict, with a schema this one does not know."""

    kind = "unavailable"
    code = "schema_too_new"


class DeviceBusy(Conflict):
    """Another writer (sweep, ingest, train, delete) holds the device."""

    code = "device_busy"


class NoSpace(InvalidInput):
    """A scratch file would not fit in the free space of its filesystem."""

    code = "no_space"


class ReadOnlyData(SsdPredictError):
    """A write to a data directory that is not writable (read-only mount, no permission)."""

    kind = "unavailable"
    code = "read_only"
