# One command runs every check: `make check` (lint, types, tests).
PYTHON ?= .venv/bin/python
INSTALLED := build/installed
PARTS := engine tracer schema replay tui

.PHONY: check lint types test test-fast installed

check: lint types test

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

test:
	$(PYTHON) -m pytest -q

# Everything but the tests marked slow (those start real vLLM engines and schedulers).
test-fast:
	$(PYTHON) -m pytest -q -m 'not slow'
