"""Settings: one pydantic-settings class, environment variables prefixed ``SSDPREDICT_``."""

from __future__ import annotations

import ipaddress
import socket
from functools import lru_cache
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything configurable, read from ``SSDPREDICT_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="SSDPREDICT_", extra="ignore")

    home: Path = Field(
        default=Path("~/.local/share/ssdpredict"),
        description="data directory (catalog, measurements, models)",
    )
    api_token: str | None = Field(
        default=None, description="bearer token required by mutating endpoints when set"
    )
    max_upload_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    max_ingest_bytes: int = Field(
        default=1 << 30, ge=1, description="largest total size of one `ssdpredict ingest` (bytes)"
    )
    max_batch: int = Field(default=10_000, ge=1, le=1_000_000)
    cors_origins: list[str] = Field(default_factory=list)
    workers: int = Field(default=1, ge=1, le=64)
    blas_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description="BLAS threads per server process (predictions parallelise by row blocks instead)",
    )
    model_refresh_ms: int = Field(
        default=500,
        ge=0,
        le=600_000,
        description="how often, at most, a server checks the catalog for versions activated elsewhere",
    )
    model_cache_mb: int = Field(
        default=2048, ge=1, description="memory budget of loaded models (estimated); least recently used out"
    )
    scheduler: str | None = Field(
        default=None,
        description="Dask scheduler (tcp://HOST:8786) for training many devices; unset: a local cluster",
    )
    fleet_workers: int | None = Field(
        default=None, ge=1, le=1024, description="processes of the local Dask cluster (default: one per core)"
    )
    fio: str | None = Field(default=None, description="path of the fio binary (default: fio on PATH)")
    open_loop_warmup_ms: int = Field(
        default=1000, ge=0, le=60_000,
        description="how long an open-loop point runs before the requests it measures (0: fio's own figures)",
    )
    spdk_plugin: str | None = Field(
        default=None, description="SPDK's fio plugin (build/fio/spdk_nvme) for --engine spdk"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    # the analysis notebooks (notebooks/nbdata.py) read their knobs here too
    device: str | None = Field(default=None, description="notebooks: analyse this existing device")
    nb_fio_dir: Path | None = Field(default=None, description="notebooks: fio JSON folder to import")
    nb_folds: int = Field(default=5, ge=2, le=20, description="notebooks: cross-validation folds")
    nb_time_budget_s: float = Field(default=60.0, ge=0.0, description="notebooks: tuning seconds")

    @field_validator("home")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("scheduler")
    @classmethod
    def _scheduler_address(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in ("tcp", "tls") or not rest:
            raise ValueError(f"scheduler must look like tcp://HOST:8786, not {value!r}")
        return value

    @field_validator("fio", "spdk_plugin")
    @classmethod
    def _empty_path_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("api_token")
    @classmethod
    def _empty_token_is_none(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, built on first use."""
    return Settings()


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` exposes the server to this machine only.

    A name counts as loopback only when every address it resolves to is: ``0.0.0.0``,
    ``::``, an interface address, or a name that does not resolve are all exposed.
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)
