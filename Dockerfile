# ssdpredict service image.
#   make docker                                    # FROM python:3.11-slim-bookworm
#   make docker BASE_IMAGE=local/debian:bookworm   # any Debian bookworm image, Python or not
#   docker run -p 8000:8000 -e SSDPREDICT_API_TOKEN=$(openssl rand -hex 16) -v ssdpredict:/data ssdpredict
# The server listens on 0.0.0.0 inside the container, so it refuses to start without
# SSDPREDICT_API_TOKEN (uploads, retrains and activations need it). To serve without a token
# on a network you trust, override the command: ... ssdpredict serve --host 0.0.0.0 --insecure
# Sweeps need the device inside the container:
#   docker run --user root --device /dev/nvme0n1 ... ssdpredict sweep --target /dev/nvme0n1 --destroy-data
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
# Behind a TLS-inspecting proxy, pip needs the proxy's CA (PEM text) to reach PyPI:
#   make docker CA_CERT=/path/to/proxy-ca.crt
# It is trusted during the build only and removed before the last layer (its text stays in
# `docker history`, as build arguments do: a CA certificate is public, never pass a secret).
ARG EXTRA_CA_CERT=""

# fio drives sweeps, blkparse (blktrace) reads block traces, nvme-cli attaches NVMe-oF
# volumes (class nvmeof), mdadm describes md arrays (class raid). Python comes from apt
# only when the base image has none that can make a venv (a plain Debian base, or one with
# python3 but not python3-venv, which holds ensurepip).
RUN set -eux; \
    pkgs="ca-certificates fio blktrace util-linux e2fsprogs nvme-cli mdadm"; \
    python3 -c 'import ensurepip' 2>/dev/null || pkgs="$pkgs python3 python3-venv"; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs; \
    rm -rf /var/lib/apt/lists/*; \
    if [ -n "$EXTRA_CA_CERT" ]; then \
      printf '%s\n' "$EXTRA_CA_CERT" > /usr/local/share/ca-certificates/build-extra-ca.crt; \
      update-ca-certificates; \
    fi; \
    python3 -c 'import sys; assert sys.version_info >= (3, 11), f"Python >= 3.11 needed, found {sys.version}"'; \
    python3 -m venv /opt/venv
# pip reads the system store (with the extra CA, if any) instead of its own bundle.
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt

WORKDIR /app
# Dependencies first, at the versions `make` installs (.ci/constraints.txt), in a layer of
# their own: editing the code then rebuilds in seconds.
COPY pyproject.toml ./
COPY .ci/constraints.txt .ci/constraints.txt
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' > /tmp/requirements.txt \
 && pip install -c .ci/constraints.txt -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
COPY README.md ./
COPY collectors ./collectors
COPY modeling ./modeling
COPY service ./service
COPY traces ./traces
RUN pip install --no-deps -c .ci/constraints.txt . \
 && rm -rf build *.egg-info \
 && if [ -f /usr/local/share/ca-certificates/build-extra-ca.crt ]; then \
      rm /usr/local/share/ca-certificates/build-extra-ca.crt && update-ca-certificates --fresh >/dev/null; \
    fi

ENV SSDPREDICT_HOME=/data
# The service runs unprivileged; sweeping a block device needs `--user root` and --device.
RUN useradd --system --home /data ssdpredict && mkdir -p /data && chown ssdpredict /data
VOLUME ["/data"]
EXPOSE 8000
USER ssdpredict
# A generous timeout: the check starts a Python interpreter, which takes seconds on a busy
# host (3 s timed out here, at a load average of 27 on 2 cores).
HEALTHCHECK --interval=30s --timeout=15s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=10)"
# No --insecure: without SSDPREDICT_API_TOKEN the container exits at once, saying so.
CMD ["ssdpredict", "serve", "--host", "0.0.0.0", "--port", "8000"]
