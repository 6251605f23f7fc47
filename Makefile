# ssdpredict — `make run` does the main job, `make test` runs the suite.
# Both install whatever is missing first (fio, blkparse, nvme-cli and mdadm from apt, a
# virtual environment in .venv with the package and its dev extra, at the versions pinned in
# .ci/constraints.txt) and are safe to run twice.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  = $(VENV)/.installed-$(XGBOOST)
SUDO   := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
# The pinned versions that `make` and the Dockerfile both install (`make lock` rewrites it).
CONSTRAINTS := .ci/constraints.txt
# cpu (default): the xgboost-cpu wheel. gpu: swap it for the CUDA build (`xgboost`, with NCCL,
# about 0.5 GB more) at the same version; only worth it on a machine with an NVIDIA GPU.
XGBOOST ?= cpu
# Docker: the base image is a build argument (any Debian bookworm image works, with or without Python).
BASE_IMAGE ?= python:3.11-slim-bookworm
IMAGE      ?= ssdpredict:latest
# A PEM file to trust during the build, for a TLS-inspecting proxy between Docker and PyPI.
CA_CERT    ?=

.PHONY: run test test-slow test-all test-browser bootstrap system-deps venv lint typecheck bench lock docker docker-smoke clean help

help:
	@echo "make run   - sweep the local scratch file, train, report accuracy, serve on 127.0.0.1:8000"
	@echo "make test  - run the test suite but its slow end-to-end set (a few minutes on 2 cores)"
	@echo "make test-slow - the slow set: notebooks, fuzzing, scikit-learn checks of the GP families, kill -9 and crash tests"
	@echo "make test-all  - everything (what CI runs: test, test-slow, test-browser)"
	@echo "make test-browser - install chromium, render the HTML report in it and check the screenshot"
	@echo "make docker [BASE_IMAGE=...] - build the image; make docker-smoke - build, run and smoke-test it"
	@echo "make lock  - rewrite $(CONSTRAINTS) from the virtualenv"
	@echo "make lint / typecheck / bench / clean"

run: bootstrap
	$(BIN)/ssdpredict quickstart

# The suite is split by the `slow` marker so that the everyday run stays short; CI
# (.ci/run) runs both halves and the browser test.
# Two test processes per core: much of the everyday suite waits on fio's
# 1 s runs, subprocesses and sockets, not on a CPU (on this 2-core machine 4 workers took
# 156 s where 2 took 172 s); work stealing keeps the long tests from ending on one worker.
# The slow set stays at one per core: its tests hold zram devices and throttles for longer.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

test: bootstrap
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow"

test-slow: bootstrap
	$(BIN)/python -m pytest -q -n auto -m "slow and not browser"

test-all: test test-slow test-browser

# Chromium is about 350 MB installed, more than the rest of the test tools together, so
# `make test` does not install it: there the browser test runs if chromium is present
# and is skipped (with the reason) if not.  This target installs it and runs that test.
test-browser: bootstrap
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium from apt"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest -q -m browser

bootstrap: system-deps venv

# fio drives every measurement; blkparse (package blktrace) reads block traces; nvme-cli
# attaches NVMe-oF volumes (class nvmeof); mdadm describes md arrays (class raid).
system-deps:
	@missing=""; \
	command -v fio >/dev/null 2>&1 || missing="$$missing fio"; \
	command -v blkparse >/dev/null 2>&1 || missing="$$missing blktrace"; \
	command -v nvme >/dev/null 2>&1 || missing="$$missing nvme-cli"; \
	command -v mdadm >/dev/null 2>&1 || missing="$$missing mdadm"; \
	command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	command -v losetup >/dev/null 2>&1 || missing="$$missing util-linux"; \
	if [ -n "$$missing" ]; then \
	  echo "installing from apt:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi; \
	command -v fio >/dev/null 2>&1 || { echo "fio is still missing: install it with 'apt-get install fio'"; exit 1; }

venv: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version))"; exit 1; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV) || { \
	  echo "python venv module missing; installing python3-venv"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	@case "$(XGBOOST)" in cpu|gpu) ;; *) echo "XGBOOST must be cpu or gpu, not '$(XGBOOST)'"; exit 1;; esac
	@# Both builds install the same `xgboost` module, so they must never overlap: the CUDA
	@# build goes first (pip then installs xgboost-cpu cleanly) and is swapped back in after.
	@# NCCL came with the CUDA build only (0.5 GB), so it goes with it.
	@if $(BIN)/python -m pip show -q xgboost >/dev/null 2>&1; then \
	  $(BIN)/python -m pip uninstall -q -y xgboost nvidia-nccl-cu12; fi
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e '.[dev]'
	@if [ "$(XGBOOST)" = gpu ]; then \
	  version=$$($(BIN)/python -c 'from importlib.metadata import version; print(version("xgboost-cpu"))') && \
	  $(BIN)/python -m pip uninstall -q -y xgboost-cpu && \
	  $(BIN)/python -m pip install -q -c $(CONSTRAINTS) "xgboost==$$version" && \
	  echo "xgboost $$version with CUDA installed (pip check will miss xgboost-cpu: expected)"; fi
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

lint: bootstrap
	$(BIN)/ruff check collectors modeling service traces tests bench notebooks

typecheck: bootstrap
	$(BIN)/mypy modeling service

bench: bootstrap
	$(BIN)/python bench/sweep_cost.py
	$(BIN)/python bench/accuracy.py
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/traces.py

# After changing pyproject.toml's dependencies. Installs what is missing without the old
# pins (already installed versions stay), with every extra, then pins the whole closure.
lock: venv
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python .ci/lock.py -o $(CONSTRAINTS)

docker:
	docker build --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	  $(if $(CA_CERT),--build-arg EXTRA_CA_CERT="$$(cat $(CA_CERT))") -t $(IMAGE) .

# Builds, runs the container with a token, and checks /healthz, /docs, a CSV upload, a
# retrain and a prediction through the API; removes the container afterwards.
docker-smoke: venv docker
	$(BIN)/python .ci/docker_smoke.py --image $(IMAGE) --no-build

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
