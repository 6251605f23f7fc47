# ssdpredict service image. Sweeps need the device inside the container:
#   docker run --device /dev/nvme0n1 ... ssdpredict sweep --target /dev/nvme0n1 --destroy-data
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends fio blktrace util-linux e2fsprogs \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY collectors ./collectors
COPY modeling ./modeling
COPY service ./service
COPY traces ./traces
RUN pip install --no-cache-dir .

ENV SSDPREDICT_HOME=/data
# The service runs unprivileged; sweeping a block device needs `--user root` and --device.
RUN useradd --system --home /data ssdpredict && mkdir -p /data && chown ssdpredict /data
VOLUME ["/data"]
EXPOSE 8000
USER ssdpredict
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["ssdpredict", "serve", "--host", "0.0.0.0", "--port", "8000"]
