# Thin wrappers; every target installs what it needs first (tools/setup.sh is idempotent).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PLATFORMIO_CORE_DIR := $(CURDIR)/.pio-core
export PLATFORMIO_SETTING_ENABLE_TELEMETRY := No
export PLATFORMIO_DISABLE_UPGRADE_CHECK := true
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup demo test lint firmware qemu bench clean

setup:
	@tools/setup.sh

demo: setup
	@tools/demo.sh

lint: setup
	$(VENV)/bin/ruff check host tests tools

test: setup lint
	$(PY) -m pytest -n 2 -q tests

firmware: setup
	$(MAKE) -C firmware all

qemu: setup
	$(MAKE) -C firmware qemu

bench: setup
	$(VENV)/bin/snapuq bench --out reports/bench.json

clean:
	rm -rf build reports .pytest_cache
