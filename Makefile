# Two commands for a fresh machine: `make demo` and `make test`.
# Both create (or reuse) the virtual environment in .venv.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint bench bench-scale clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/itsmreview demo

test: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONSAFEPATH=1 $(BIN)/pytest

bench: venv
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/run.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/agreement.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/exports.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/ledger.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/browser.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/model_rater.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/bpi2014.py

bench-scale: venv
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/scale.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
