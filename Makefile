# One command runs every check: `make check` (lint, types, tests).
PYTHON ?= .venv/bin/python
TYPECHECK := build/typecheck
PARTS := engine tracer schema replay tui

.PHONY: check lint types test test-fast

check: lint types test

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# mypy cannot follow setuptools' folder-to-package mapping, so check a copy laid out
# the way the package is installed.
types:
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/stepscope
	cp -r stepscope/. $(TYPECHECK)/stepscope/
	for part in $(PARTS); do cp -r $$part $(TYPECHECK)/stepscope/$$part; done
	cd $(TYPECHECK) && $(abspath $(PYTHON)) -m mypy --config-file $(CURDIR)/pyproject.toml stepscope

test:
	$(PYTHON) -m pytest -q

# Everything but the tests marked slow (those start real vLLM engines and schedulers).
test-fast:
	$(PYTHON) -m pytest -q -m 'not slow'
