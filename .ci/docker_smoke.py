"""Build the image, run it, and smoke-test the container through its HTTP API.

    make docker-smoke [BASE_IMAGE=local/debian:bookworm] [CA_CERT=proxy-ca.crt]
    .venv/bin/python .ci/docker_smoke.py --image ssdpredict:smoke --base-image local/debian:bookworm

Checks, in order: without a token the container refuses to start (exit 2, one line); with
one it answers /healthz; /docs and its assets come from the container itself; a CSV upload
of real fio results (tests/data/fio-plot, converted by the project's own fio parser) and a
fio JSON upload are stored; a retrain through the API succeeds; a prediction answers from
the new model. Each step prints one line; the first failure exits 1 with the container's log.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from any folder: the project's parser is reused

from collectors.fio.results import parse_fio_output  # noqa: E402
from collectors.ingest import KNOWN_COLUMNS  # noqa: E402

FIO_RESULTS = REPO / "tests" / "data" / "fio-plot" / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"
DEVICE = "smoke-intel-s4610"
WORKLOAD = {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1.0}


class SmokeFailure(Exception):
    """A check failed; the message says which and what was seen."""


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI and capture its output."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise SmokeFailure(f"docker {args[0]} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def build(image: str, base_image: str, ca_cert: Path | None) -> None:
    """`docker build` the repository with the given base image (what `make docker` runs)."""
    args = ["build", "--build-arg", f"BASE_IMAGE={base_image}", "-t", image]
    if ca_cert is not None:
        args += ["--build-arg", f"EXTRA_CA_CERT={ca_cert.read_text()}"]
    started = time.monotonic()
    proc = subprocess.run(["docker", *args, str(REPO)], capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SmokeFailure(f"docker build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"ok   build {image} FROM {base_image} ({time.monotonic() - started:.0f} s)")


def fio_plot_csv(paths: Sequence[Path]) -> bytes:
    """Real fio results as an ingest-format CSV (columns ingest knows; NaN left empty)."""
    rows = [r.row for p in paths for r in parse_fio_output(p.read_text(), source=p.name)]
    columns = [c for c in rows[0] if c in KNOWN_COLUMNS]
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in rows:
        values = (row[c] for c in columns)
        writer.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in values])
    return out.getvalue().encode()


def check_refuses_without_token(image: str) -> None:
    """The image's default command must not serve on 0.0.0.0 without a token."""
    proc = docker("run", "--rm", image, check=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or "SSDPREDICT_API_TOKEN" not in lines[0]:
        raise SmokeFailure(f"expected a one-line refusal and exit 2, got {proc.returncode}: {proc.stderr!r}")
    print(f"ok   no token: exit 2, {lines[0]}")


def wait_healthy(http: httpx.Client, container: str, timeout: float = 180) -> None:
    """Poll /healthz until 200; fail early if the container stops."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = http.get("/healthz")
            if r.status_code == 200:
                print(f"ok   GET /healthz -> 200 {r.json()}")
                return
        except httpx.TransportError:
            pass
        state = docker("inspect", "-f", "{{.State.Status}}", container).stdout.strip()
        if state != "running":
            raise SmokeFailure(f"container is {state} before answering /healthz")
        if time.monotonic() > deadline:
            raise SmokeFailure(f"/healthz did not answer within {timeout:.0f} s")
        time.sleep(0.5)


def expect(r: httpx.Response, status: int, what: str) -> Any:
    """Check a response's status and return its JSON body (or None for non-JSON)."""
    if r.status_code != status:
        raise SmokeFailure(f"{what}: expected {status}, got {r.status_code}: {r.text[:500]}")
    return r.json() if r.headers.get("content-type", "").startswith("application/json") else None


def check_docs(http: httpx.Client) -> None:
    """/docs references only assets the container serves itself."""
    page = http.get("/docs")
    expect(page, 200, "GET /docs")
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    remote = [u for u in urls if re.match(r"^(https?:)?//", u)]
    if remote or not urls:
        raise SmokeFailure(f"/docs references remote or no assets: {urls}")
    sizes = {}
    for url in urls:
        asset = http.get(url)
        expect(asset, 200, f"GET {url}")
        sizes[url] = len(asset.content)
    print(f"ok   GET /docs -> 200, local assets {', '.join(f'{u} ({n} B)' for u, n in sizes.items())}")


def check_api(http: httpx.Client, token: str) -> None:
    """Uploads, retrain and prediction through the container's API."""
    auth = {"Authorization": f"Bearer {token}"}
    files = sorted(FIO_RESULTS.glob("*.json"))
    if not files:
        raise SmokeFailure(f"no fio results in {FIO_RESULTS}")
    body = fio_plot_csv(files)
    upload = f"/v1/devices/{DEVICE}/sweeps"
    expect(http.post(upload, files={"file": ("fio-plot.csv", body, "text/csv")}), 401, "upload without token")
    sweep = expect(
        http.post(upload, files={"file": ("fio-plot.csv", body, "text/csv")}, headers=auth), 201, "CSV upload"
    )
    print(f"ok   POST {upload} (CSV of {len(files)} fio-plot results, {len(body)} B) -> 201 {sweep}")
    one = files[0]
    sweep = expect(
        http.post(upload, files={"file": (one.name, one.read_bytes(), "application/json")}, headers=auth),
        201,
        "fio JSON upload",
    )
    print(f"ok   POST {upload} (fio JSON {one.name}) -> 201 {sweep}")

    job = expect(
        http.post(f"/v1/devices/{DEVICE}/retrain", json={"folds": 2, "time_budget_s": 30}, headers=auth),
        202,
        "retrain",
    )
    started = time.monotonic()
    while job["state"] in ("queued", "running"):
        if time.monotonic() - started > 900:
            raise SmokeFailure(f"retrain still {job['state']} after 900 s")
        time.sleep(2)
        job = expect(http.get(f"/v1/jobs/{job['id']}"), 200, "job")
    if job["state"] != "succeeded":
        raise SmokeFailure(f"retrain {job['state']}: {job.get('error')}")
    took = time.monotonic() - started
    print(f"ok   retrain job {job['id']} succeeded in {took:.0f} s: {job.get('result')}")

    answer = expect(http.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD}), 200, "predict")
    predictions = answer["predictions"]
    bad = {m: p for m, p in predictions.items() if not (p["value"] > 0 and math.isfinite(p["value"]))}
    if not predictions or bad:
        raise SmokeFailure(f"prediction without positive finite values: {answer}")
    summary = ", ".join(f"{m}={p['value']:.4g} [{p['lower']}..{p['upper']}]" for m, p in predictions.items())
    print(f"ok   POST /v1/predict {WORKLOAD} -> model {answer['model_version']}: {summary}")


def smoke(image: str) -> None:
    """Run the container with a fresh token and check it end to end; always remove it."""
    check_refuses_without_token(image)
    token = secrets.token_hex(16)
    container = docker(
        "run", "-d", "-e", f"SSDPREDICT_API_TOKEN={token}", "-p", "127.0.0.1::8000", image
    ).stdout.strip()
    try:
        port = docker("port", container, "8000/tcp").stdout.split()[0].rsplit(":", 1)[1]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            wait_healthy(http, container)
            check_docs(http)
            check_api(http, token)
    except (SmokeFailure, httpx.HTTPError, KeyError, IndexError) as exc:
        log = docker("logs", "--tail", "40", container, check=False)
        raise SmokeFailure(f"{exc}\n--- container log ---\n{log.stdout}{log.stderr}") from None
    finally:
        docker("rm", "-f", container, check=False)


def main() -> int:
    """Parse the arguments, build unless told not to, and smoke-test the image."""
    parser = argparse.ArgumentParser(description="Build, run and smoke-test the ssdpredict image.")
    parser.add_argument("--image", default="ssdpredict:smoke")
    parser.add_argument("--base-image", default="python:3.11-slim-bookworm")
    parser.add_argument("--ca-cert", type=Path, help="PEM to trust during the build (TLS-inspecting proxy)")
    parser.add_argument("--no-build", action="store_true", help="test an image built already")
    args = parser.parse_args()
    try:
        if not args.no_build:
            build(args.image, args.base_image, args.ca_cert)
        size = docker("image", "inspect", "-f", "{{.Size}}", args.image).stdout.strip()
        print(f"ok   image {args.image}: {int(size) / 1e6:.0f} MB")
        smoke(args.image)
    except (SmokeFailure, subprocess.TimeoutExpired) as exc:
        print(f"FAIL {exc}", file=sys.stderr)
        return 1
    print("docker smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
