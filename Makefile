# The two commands: `make run` (the main job on the bundled examples) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
OUT ?= out

.PHONY: run test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/tracegen trace-functions --input examples/functions.jsonl --out $(OUT) --overwrite

test: $(STAMP)
	cd go_harness && go test ./...
	$(PY) -m pytest -q

clean:
	rm -rf $(OUT) $(VENV)
