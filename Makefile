# Two commands for a fresh machine: `make demo` and `make test`.
# Both create (or reuse) the virtual environment in .venv.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Peer programs that need another Python than ours (Harbor needs 3.12+) live in a venv of their own;
# the tests run them as subprocesses (ITSMREVIEW_PEERS_PYTHON names another interpreter).
PEERS_VENV ?= .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-stamp
PEERS := "harbor>=0.25"

.PHONY: venv peers demo team team-down test test-fast docs wheel-check lint bench bench-scale coverage clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

# Without a Python 3.12+ the peer tests skip (and fail in CI, which has one).
$(PEERS_STAMP): Makefile
	@py=""; for c in python3.13 python3.12 $(HOME)/.pyenv/versions/3.13*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3; do \
	  if $$c -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then py=$$c; break; fi; done; \
	if [ -z "$$py" ]; then echo "peers: no Python 3.12+ found; Harbor's loader tests will skip"; exit 0; fi; \
	test -x $(PEERS_VENV)/bin/python || $$py -m venv $(PEERS_VENV); \
	$(PEERS_VENV)/bin/python -m pip install --quiet $(PEERS) && touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

demo: venv
	$(BIN)/itsmreview demo

# Two replicas behind nginx, one worker, an S3 server and the local PostgreSQL, on this machine
# (itsmreview.deploy.team; needs Debian's nginx). `make team-down` stops them; the data stays in build/team.
team: venv
	$(BIN)/python -m itsmreview.deploy.team up

team-down:
	$(BIN)/python -m itsmreview.deploy.team down

test: venv peers
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python .ci/lint-imports
	PYTHONSAFEPATH=1 $(BIN)/cog --check $(COG) docs/cli.md
	PYTHONSAFEPATH=1 $(BIN)/pytest
	PYTHON=$(BIN)/python .ci/wheel-check

# The fast tier for the edit-test loop (about a minute): lint, contracts, docs, pure tests.
# `make test` (what CI runs) is the whole suite on both databases, the browser and the wheel.
test-fast: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python .ci/lint-imports
	PYTHONSAFEPATH=1 $(BIN)/cog --check $(COG) docs/cli.md
	PYTHONSAFEPATH=1 $(BIN)/pytest -q tests/unit

# The wheel built from this checkout, installed into a clean venv: --help, every module, the demo.
# docs/cli.md's help blocks, regenerated from the commands themselves
COG := -p "from cli_doc import cli_help" -I docs
docs: venv
	PYTHONSAFEPATH=1 $(BIN)/cog -r $(COG) docs/cli.md

wheel-check: venv
	PYTHON=$(BIN)/python .ci/wheel-check

bench: venv
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/run.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/agreement.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/exports.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/ledger.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/browser.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/model_rater.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/bpi2014.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/imports.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/realism.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/delphi.py
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/logs.py

bench-scale: venv
	PYTHONSAFEPATH=1 $(BIN)/python benchmarks/scale.py

# Line coverage per package, by the same tests (TESTS=tests/unit for the fast ones).
TESTS ?= tests
coverage: venv
	mkdir -p build
	COVERAGE_FILE=build/.coverage $(BIN)/python -m coverage run --source=app,review,coverage,ledger,exports,catalog,accounts,realism -m pytest -q $(TESTS)
	$(BIN)/python .ci/coverage-by-package build/.coverage

clean:
	rm -rf $(VENV) $(PEERS_VENV) .pytest_cache .ruff_cache
