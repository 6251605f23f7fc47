# ssdpredict — `make run` does the main job, `make test` runs the suite.
# Both install whatever is missing first (fio and blkparse from apt, a virtual
# environment in .venv with the package and its dev extra) and are safe to run twice.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
APT_PACKAGES := fio blktrace e2fsprogs util-linux

.PHONY: run test test-browser bootstrap system-deps venv lint typecheck bench clean help

help:
	@echo "make run   - sweep the local scratch file, train, report accuracy, serve on 127.0.0.1:8000"
	@echo "make test  - run the whole test suite"
	@echo "make test-browser - install chromium, render the HTML report in it and check the screenshot"
	@echo "make lint / typecheck / bench / clean"

run: bootstrap
	$(BIN)/ssdpredict quickstart

test: bootstrap
	$(BIN)/python -m pytest -q -n auto

# Chromium is about 350 MB installed, more than the rest of the test tools together, so
# `make test` does not install it: there the browser test runs if chromium is present
# and is skipped (with the reason) if not.  This target installs it and runs that test.
test-browser: bootstrap
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium from apt"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }
	$(BIN)/python -m pytest -q -m browser

bootstrap: system-deps venv

# fio drives every measurement; blkparse (package blktrace) reads block traces.
system-deps:
	@missing=""; \
	command -v fio >/dev/null 2>&1 || missing="$$missing fio"; \
	command -v blkparse >/dev/null 2>&1 || missing="$$missing blktrace"; \
	command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	command -v losetup >/dev/null 2>&1 || missing="$$missing util-linux"; \
	if [ -n "$$missing" ]; then \
	  echo "installing from apt:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi; \
	command -v fio >/dev/null 2>&1 || { echo "fio is still missing: install it with 'apt-get install fio'"; exit 1; }

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version))"; exit 1; }
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV) || { \
	  echo "python venv module missing; installing python3-venv"; \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

lint: bootstrap
	$(BIN)/ruff check collectors modeling service traces tests bench

typecheck: bootstrap
	$(BIN)/mypy modeling service

bench: bootstrap
	$(BIN)/python bench/sweep_cost.py
	$(BIN)/python bench/accuracy.py
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/traces.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
