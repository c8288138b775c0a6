# Thin wrappers; every target installs what it needs first (tools/setup.sh is idempotent).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PLATFORMIO_CORE_DIR := $(CURDIR)/.pio-core
export PLATFORMIO_SETTING_ENABLE_TELEMETRY := No
export PLATFORMIO_DISABLE_UPGRADE_CHECK := true
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup demo test test-fast lint firmware qemu bench clean

setup:
	@tools/setup.sh

demo: setup
	@tools/demo.sh

lint: setup
	$(VENV)/bin/ruff check host tests tools
	cd host && ../$(VENV)/bin/lint-imports --no-cache ../pyproject.toml  # the layers contract

# SNAPUQ_STRICT_SKIPS: a skip for a missing tool, oracle or shipped model is a failure (tests/conftest.py)
test: setup lint
	SNAPUQ_STRICT_SKIPS=1 $(PY) -m pytest -n 2 -q tests

# unit + C core + MicroPython twin: everything not marked slow / qemu / train (tests/conftest.py)
test-fast: setup lint
	SNAPUQ_STRICT_SKIPS=1 $(PY) -m pytest -n 2 -q -m "not slow and not qemu and not train" tests

firmware: setup
	$(MAKE) -C firmware all

qemu: setup
	$(MAKE) -C firmware qemu

bench: setup
	$(VENV)/bin/snapuq bench --out reports/bench.json

clean:
	rm -rf build reports .pytest_cache
