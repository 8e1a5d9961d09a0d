# The two commands: `make run` (the main job on the bundled examples) and `make test` (lint, then the whole
# suite). Each first makes sure the machine has what it needs (scripts/prereqs.sh: Debian packages, dockerd).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.run-stamp
TEST_STAMP := $(VENV)/.test-stamp
OUT ?= out

# The suite on every core (pytest-xdist), unbuffered so an interrupted run shows where it was, with the slowest
# tests listed at the end. The quick lane leaves out what starts Ray, Docker or a cluster (markers set in
# tests/conftest.py): the tests a developer runs while iterating.
PYTEST := PYTHONUNBUFFERED=1 $(PY) -m pytest -n auto --durations=15 -o faulthandler_timeout=900
QUICK := not ray and not docker and not cluster and not slow

.PHONY: run test test-quick lint prereqs-run prereqs-test clean

prereqs-run:
	@scripts/prereqs.sh run

prereqs-test:
	@scripts/prereqs.sh test

# `make run` installs the package alone; `make test` adds the test extra (pytest, linters, torch, datasets),
# so the main job never waits for torch's wheels.
$(RUN_STAMP): pyproject.toml | prereqs-run
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(RUN_STAMP)

$(TEST_STAMP): $(RUN_STAMP)
	$(PY) -m pip install -q -e ".[test]"
	touch $(TEST_STAMP)

run: prereqs-run $(RUN_STAMP)
	$(VENV)/bin/tracegen trace-functions --input examples/functions.jsonl --out $(OUT) --overwrite

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pyright pipeline
	cd go_harness && test -z "$$(gofmt -l .)" && go vet ./...

test: prereqs-test $(TEST_STAMP) lint
	cd go_harness && go test ./...
	$(PYTEST) -q

test-quick: prereqs-run $(TEST_STAMP)
	$(PYTEST) -q -m "$(QUICK)"

clean:
	rm -rf $(OUT) $(VENV)
