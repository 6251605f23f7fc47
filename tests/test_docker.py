"""The Docker image builds, refuses to serve without a token, and serves a full round trip.

Runs .ci/docker_smoke.py (the script behind `make docker-smoke`) where a Docker daemon
answers and the base image is there or can be pulled; skips, saying which is missing, where
not. The base image and a build CA come from the same variables as the Makefile's:
BASE_IMAGE (default python:3.11-slim-bookworm), CA_CERT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _docker_unavailable() -> str | None:
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"`docker info` failed: {lines[-1] if lines else proc.returncode}"
    return None


def _base_unavailable(base: str) -> str | None:
    if subprocess.run(["docker", "image", "inspect", base], capture_output=True).returncode == 0:
        return None
    proc = subprocess.run(["docker", "pull", base], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return f"`docker pull {base}` failed: {lines[-1] if lines else proc.returncode} (set BASE_IMAGE)"
    return None


def test_image_builds_and_passes_the_smoke_test() -> None:
    reason = _docker_unavailable()
    if reason:
        pytest.skip(f"no Docker daemon: {reason}")
    base = os.environ.get("BASE_IMAGE", "python:3.11-slim-bookworm")
    reason = _base_unavailable(base)
    if reason:
        pytest.skip(f"no base image: {reason}")
    args = [sys.executable, str(REPO / ".ci" / "docker_smoke.py"), "--image", "ssdpredict:pytest-smoke"]
    args += ["--base-image", base]
    if os.environ.get("CA_CERT"):
        args += ["--ca-cert", os.environ["CA_CERT"]]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    steps = ["no token: exit 2", "GET /healthz -> 200", "GET /docs -> 200", "CSV of", "succeeded"]
    steps.append("POST /v1/predict")
    for step in steps:
        assert step in proc.stdout, (step, proc.stdout)
